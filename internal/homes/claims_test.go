package homes

import "testing"

func TestParseClaims_RefusesTemplatesThatNameNoObject(t *testing.T) {
	for _, bad := range []string{"home", "Home-{username}", "home/{username}", "home_{username}", "{username}-"} {
		if _, err := ParseClaims(bad); err == nil {
			t.Errorf("ParseClaims(%q) was accepted", bad)
		}
	}
	for _, good := range []string{"", "{username}", "home-{username}", "{username}.homes"} {
		if _, err := ParseClaims(good); err != nil {
			t.Errorf("ParseClaims(%q): %v", good, err)
		}
	}
}

func TestClaimsFor_OneClaimPerUserNeverFolded(t *testing.T) {
	c, err := ParseClaims("home-{username}")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.For("ann"); err != nil || got != "home-ann" {
		t.Fatalf("For(ann) = %q, %v", got, err)
	}
	// Names that would have to change to be object names are refused: "Ann" must not get
	// ann's volume, nor "ann_b" that of "ann-b".
	for _, bad := range []string{"", "Ann", "ann_b", "ann/ben", "ann@example.org", "ann."} {
		if got, err := c.For(bad); err == nil {
			t.Errorf("For(%q) = %q, want a refusal", bad, got)
		}
	}
	var off Claims
	if got, err := off.For("ann"); err != nil || got != "" || off.On() {
		t.Fatalf("off: For(ann) = %q, %v, On %v", got, err, off.On())
	}
}
