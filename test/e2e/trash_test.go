package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLocal_DeletedDirectoryGoesToTheTrashAndComesBack: as Jupyter's default delete_to_trash,
// deleting a directory with contents succeeds, and nbkube's trash routes bring it back.
func TestLocal_DeletedDirectoryGoesToTheTrashAndComesBack(t *testing.T) {
	dataDir, root := t.TempDir(), t.TempDir()
	inst := startLocal(t, dataDir, root)
	api := inst.api(t)

	api.call(t, http.MethodPut, "api/contents/project", map[string]string{"type": "directory"}).want(t, http.StatusCreated)
	api.call(t, http.MethodPut, "api/contents/project/notes.txt", map[string]string{"type": "file", "format": "text", "content": "keep me"}).want(t, http.StatusCreated)
	api.call(t, http.MethodPut, "api/contents/project/data", map[string]string{"type": "directory"}).want(t, http.StatusCreated)
	api.call(t, http.MethodPut, "api/contents/project/data/a.csv", map[string]string{"type": "file", "format": "text", "content": "1,2\n"}).want(t, http.StatusCreated)

	api.call(t, http.MethodDelete, "api/contents/project", nil).want(t, http.StatusNoContent)
	var listing struct {
		Content []struct{ Name string } `json:"content"`
	}
	api.getJSON(t, "api/contents", &listing)
	for _, e := range listing.Content {
		if e.Name == "project" || strings.HasPrefix(e.Name, ".") {
			t.Errorf("root listing after delete shows %q", e.Name)
		}
	}
	api.call(t, http.MethodGet, "api/contents/project", nil).want(t, http.StatusNotFound)

	var trash []struct {
		ID           string `json:"id"`
		OriginalPath string `json:"original_path"`
		Type         string `json:"type"`
	}
	api.getJSON(t, "api/trash", &trash)
	if len(trash) != 1 || trash[0].OriginalPath != "project" || trash[0].Type != "directory" {
		t.Fatalf("trash %+v", trash)
	}
	// On the volume, in the user's trash, for an admin to find.
	info := filepath.Join(root, ".nbkube", "trash", localUserName(), "info", trash[0].ID+".trashinfo")
	if data, err := os.ReadFile(info); err != nil || !strings.Contains(string(data), "Path=project\n") {
		t.Errorf("trash info %s: %q %v", info, data, err)
	}

	api.call(t, http.MethodPost, "api/trash/"+trash[0].ID+"/restore", nil).want(t, http.StatusOK)
	var file struct{ Content string }
	api.getJSON(t, "api/contents/project/notes.txt", &file)
	if file.Content != "keep me" {
		t.Errorf("restored notes.txt holds %q", file.Content)
	}
	api.getJSON(t, "api/contents/project/data/a.csv", &file)
	if file.Content != "1,2\n" {
		t.Errorf("restored data/a.csv holds %q", file.Content)
	}
	api.getJSON(t, "api/trash", &trash)
	if len(trash) != 0 {
		t.Errorf("trash after restore %+v", trash)
	}
}
