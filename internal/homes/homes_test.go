package homes

import "testing"

func TestParse_RefusesTemplatesThatCouldLeaveTheVolumeOrShareHomes(t *testing.T) {
	for _, bad := range []string{"users", "/{username}", "../{username}", "users/../{username}", "./{username}",
		"{username}/", "users//{username}", ".homes/{username}", "{username}\x00"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) was accepted", bad)
		}
	}
	for _, good := range []string{"", "{username}", "users/{username}", "home-{username}/work"} {
		if _, err := Parse(good); err != nil {
			t.Errorf("Parse(%q): %v", good, err)
		}
	}
}

func TestFor_RendersOneDirectoryPerUser(t *testing.T) {
	tpl, err := Parse("users/{username}")
	if err != nil {
		t.Fatal(err)
	}
	if h, err := tpl.For("ann@example.org"); err != nil || h != "users/ann@example.org" {
		t.Fatalf("For(ann) = %q, %v", h, err)
	}
	for _, bad := range []string{"", ".", "..", ".nbkube", "ann/../ben", "a/b", "x\x00"} {
		if h, err := tpl.For(bad); err == nil {
			t.Errorf("For(%q) = %q, want a refusal", bad, h)
		}
	}
	if got := tpl.Glob(); got != "users/*" {
		t.Fatalf("Glob() = %q", got)
	}
}

func TestFor_OffIsTheVolumeRoot(t *testing.T) {
	var off Template
	if h, err := off.For("ann"); err != nil || h != "" || off.On() {
		t.Fatalf("homes off: For(ann) = %q, %v, On %v", h, err, off.On())
	}
}
