package nbformat

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"
)

const emptyNotebook = "{\n \"cells\": [],\n \"metadata\": {},\n \"nbformat\": 4,\n \"nbformat_minor\": 5\n}\n"

// nbformatJob asks Debian's nbformat (python3-nbformat, which python3-jupyter-server brings)
// for what it makes of a notebook's JSON text:
//   - "read": nbformat.reads(text, as_version=4), what Jupyter's get serves;
//   - "downgrade": that, downgraded to v3 and written by nbformat's v3 writer without
//     splitting lines, with Name in its metadata;
//   - "save": Jupyter Server's FileContentsManager.save of it as a notebook, Text being
//     the file it writes.
type nbformatJob struct {
	Op   string `json:"op"`
	Text string `json:"text"`
	Name string `json:"name,omitempty"`
}

// nbformatAnswer is nbformat's answer to a job: the notebook (read, downgrade) or the file
// (save), whether it failed validation, or the exception that refused it.
type nbformatAnswer struct {
	NB      json.RawMessage `json:"nb"`
	Text    string          `json:"text"`
	Invalid bool            `json:"invalid"`
	// Message is the save's validation message.
	Message string `json:"message"`
	Error   string `json:"error"`
}

const nbformatScript = `
import json, logging, os, sys, tempfile, warnings
warnings.simplefilter("ignore")
logging.disable(logging.CRITICAL)
import nbformat
from jupyter_server.services.contents.filemanager import FileContentsManager
root = tempfile.mkdtemp()
manager = FileContentsManager(root_dir=root)
answers = []
for job in json.load(sys.stdin):
    try:
        cap = {}
        if job["op"] == "save":
            model = manager.save({"type": "notebook", "content": json.loads(job["text"])}, "n.ipynb")
            with open(os.path.join(root, "n.ipynb"), encoding="utf-8") as f:
                answers.append({"text": f.read(), "invalid": "message" in model, "message": model.get("message") or ""})
            os.remove(os.path.join(root, "n.ipynb"))
            continue
        nb = nbformat.reads(job["text"], as_version=4, capture_validation_error=cap)
        if job["op"] == "downgrade":
            nb = nbformat.v4.downgrade(nb)
            nb.metadata.name = job["name"]
            nb = json.loads(nbformat.v3.writes_json(nb, split_lines=False))
        answers.append({"nb": nb, "invalid": "ValidationError" in cap})
    except Exception as e:
        answers.append({"error": repr(e) + " " + str(getattr(e, "log_message", ""))})
json.dump(answers, sys.stdout)
`

// runNbformat answers jobs with one run of /usr/bin/python3, or skips the test when its
// nbformat or Jupyter Server is missing.
func runNbformat(t testing.TB, jobs []nbformatJob) []nbformatAnswer {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import nbformat, jupyter_server").Run(); err != nil {
		t.Skipf("python3's nbformat or jupyter_server is missing (hack/install-test-deps.sh installs python3-jupyter-server, which brings both): %v", err)
	}
	in, err := json.Marshal(jobs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", "-c", nbformatScript)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("nbformat: %v\n%s", err, stderr.String())
	}
	var answers []nbformatAnswer
	if err := json.Unmarshal(out, &answers); err != nil || len(answers) != len(jobs) {
		t.Fatalf("nbformat answered %d of %d jobs (%v): %.500s", len(answers), len(jobs), err, out)
	}
	return answers
}
