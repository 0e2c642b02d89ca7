package apiserver_test

import (
	"net/http"
	"net/url"
	"testing"
)

// fileID is GET /api/fileid/id for path as user, with its status.
func fileID(t *testing.T, s *testServer, headers []string, path string) (response, string) {
	t.Helper()
	r := s.do("GET", "/api/fileid/id?path="+url.QueryEscape(path), nil, headers...)
	if r.status != http.StatusOK {
		return r, ""
	}
	m := r.json(t)
	if m["path"] != path {
		t.Errorf("the model of %q has path %v", path, m["path"])
	}
	return r, m["id"].(string)
}

// TestFileID_FollowsRenamesThroughTheAPIAndStaysInTheHome: jupyter_server_fileid's routes;
// an id follows a file renamed by PATCH /api/contents (also its parent's), a copy gets a new one,
// a DELETE forgets it, and ids and paths are each user's home's: ben cannot resolve ann's.
func TestFileID_FollowsRenamesThroughTheAPIAndStaysInTheHome(t *testing.T) {
	s, as := homesServer(t, "users/{username}")
	ann, ben := as("ann"), as("ben")
	expect(t, s.do("PUT", "/api/contents/d", `{"type":"directory"}`, ann...), http.StatusCreated)
	expect(t, s.do("PUT", "/api/contents/d/f.txt", `{"type":"file","format":"text","content":"x"}`, ann...), http.StatusCreated)
	_, fid := fileID(t, s, ann, "d/f.txt")
	_, did := fileID(t, s, ann, "d")
	if fid == "" || did == "" || fid == did {
		t.Fatalf("ids %q %q", fid, did)
	}
	if _, again := fileID(t, s, ann, "d/f.txt"); again != fid {
		t.Errorf("the second answer %q, want %q", again, fid)
	}

	expect(t, s.do("PATCH", "/api/contents/d/f.txt", `{"path":"d/g.txt"}`, ann...), http.StatusOK)
	expect(t, s.do("PATCH", "/api/contents/d", `{"path":"e"}`, ann...), http.StatusOK)
	for id, want := range map[string]string{fid: "e/g.txt", did: "e"} {
		r := s.do("GET", "/api/fileid/path?id="+id, nil, ann...)
		expect(t, r, http.StatusOK)
		if m := r.json(t); m["path"] != want || m["id"] != id {
			t.Errorf("path of %s: %s, want %s", id, r.body, want)
		}
	}

	// Another user's ids name nothing of theirs; their own paths are their home's.
	expect(t, s.do("GET", "/api/fileid/path?id="+fid, nil, ben...), http.StatusNotFound)
	r, _ := fileID(t, s, ben, "e/g.txt")
	expect(t, r, http.StatusNotFound)
	expect(t, s.do("PUT", "/api/contents/e.txt", `{"type":"file","format":"text","content":"b"}`, ben...), http.StatusCreated)
	if _, bid := fileID(t, s, ben, "e.txt"); bid == "" || bid == fid {
		t.Errorf("ben's id %q", bid)
	}

	// A copy is a new file; a deleted file's id is forgotten.
	expect(t, s.do("POST", "/api/contents/e", `{"copy_from":"e/g.txt"}`, ann...), http.StatusCreated)
	if _, cid := fileID(t, s, ann, "e/g-Copy1.txt"); cid == "" || cid == fid {
		t.Errorf("the copy's id %q (the original's %q)", cid, fid)
	}
	expect(t, s.do("DELETE", "/api/contents/e/g.txt", nil, ann...), http.StatusNoContent)
	expect(t, s.do("GET", "/api/fileid/path?id="+fid, nil, ann...), http.StatusNotFound)
}

func TestFileID_BadRequestsAreJupyterErrors(t *testing.T) {
	s, as := homesServer(t, "users/{username}")
	ann := as("ann")
	expect(t, s.do("GET", "/api/fileid/id", nil, ann...), http.StatusBadRequest)
	expect(t, s.do("GET", "/api/fileid/path", nil, ann...), http.StatusBadRequest)
	expect(t, s.do("GET", "/api/fileid/path?id=not-an-id", nil, ann...), http.StatusNotFound)
	r, _ := fileID(t, s, ann, "missing.txt")
	expect(t, r, http.StatusNotFound)
	r, _ = fileID(t, s, ann, ".nbkube/ids")
	expect(t, r, http.StatusForbidden)
	r, _ = fileID(t, s, ann, "../ben")
	if r.status < 400 || r.status >= 500 {
		t.Errorf("a path above the home: %d %s", r.status, r.body)
	}
	expect(t, s.do("GET", "/api/fileid/id?path=x", nil), http.StatusForbidden)
}
