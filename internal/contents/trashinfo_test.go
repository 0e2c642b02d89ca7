package contents

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestTrashInfo_WrittenAsTheXDGSpecificationAndReadBack(t *testing.T) {
	ti := trashInfo{path: "a b/ü%?#.txt", deleted: time.Date(2024, 6, 1, 14, 0, 0, 0, time.FixedZone("CEST", 2*3600))}
	data := ti.marshal()
	if want := "[Trash Info]\nPath=a%20b/%C3%BC%25%3F%23.txt\nDeletionDate=2024-06-01T12:00:00\n"; string(data) != want {
		t.Errorf("marshal = %q, want %q", data, want)
	}
	got, err := parseTrashInfo(data)
	if err != nil || got.path != ti.path || !got.deleted.Equal(ti.deleted) {
		t.Errorf("parse = %+v, %v", got, err)
	}
	// Written by another tool: other keys, spaces, CRLF.
	got, err = parseTrashInfo([]byte("[Trash Info]\r\nX-Other=1\r\nDeletionDate=2024-01-02T03:04:05\r\nPath=x/y%20z\r\n"))
	if err != nil || got.path != "x/y z" || got.deleted != time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC) {
		t.Errorf("parse of another tool's file = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "Path=x\nDeletionDate=2024-01-02T03:04:05\n", "[Trash Info]\nPath=x\n", "[Trash Info]\nPath=%zz\nDeletionDate=2024-01-02T03:04:05\n", "[Trash Info]\nPath=x\nDeletionDate=yesterday\n"} {
		if _, err := parseTrashInfo([]byte(bad)); err == nil {
			t.Errorf("parse of %q succeeded", bad)
		}
	}
}

func TestTrashName_LongNamesAreCutAtACharacterKeepingTheExtension(t *testing.T) {
	long := ""
	for len(long) < 300 {
		long += "é"
	}
	for _, tc := range []struct{ name, want string }{
		{"short.txt", "short.txt"},
		{long + ".ipynb", long[:trashNameMax-len(".ipynb")] + ".ipynb"},
		{long + "x", long[:trashNameMax]},
	} {
		got := trashName(tc.name)
		if diff := cmp.Diff(tc.want, got); diff != "" || len(got) > trashNameMax {
			t.Errorf("trashName(%d bytes) (-want +got):\n%s", len(tc.name), diff)
		}
	}
}

func TestTrash_UserNamesBecomeOneSafeDirectoryEach(t *testing.T) {
	long := string(make([]byte, 300))
	for _, tc := range []struct{ user, dir string }{
		{"alice", "alice"},
		{"alice@example.com", "alice@example.com"},
		{"../../etc", "%2E.%2F..%2Fetc"},
		{".", "%2E"},
		{"DOMAIN\\bob smith", "DOMAIN%5Cbob%20smith"},
		{"ü~", "%C3%BC%7E"},
	} {
		if got := trashUserDir(tc.user); got != trashDir+"/"+tc.dir {
			t.Errorf("trashUserDir(%q) = %q, want %q", tc.user, got, trashDir+"/"+tc.dir)
		}
	}
	a, b := trashUserDir(long), trashUserDir(long[:299]+"x")
	if a == b || len(a)-len(trashDir)-1 > trashNameMax {
		t.Errorf("long names: %q and %q", a, b)
	}
}
