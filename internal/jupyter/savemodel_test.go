package jupyter

import (
	"encoding/json"
	"reflect"
	"testing"
)

// DecodeSaveModel gives what encoding/json gave for the bodies clients send, and refuses
// what it refused.
func TestDecodeSaveModel_AsEncodingJSON(t *testing.T) {
	for _, body := range []string{
		`{"type":"notebook","format":"json","content":{"cells":[],"metadata":{},"nbformat":4,"nbformat_minor":5}}`,
		`{"type":"file","format":"text","content":"h\u00e9llo\n","name":"a.txt","path":"d/a.txt"}`,
		`{"type":"file","format":"base64","content":"aGk=","chunk":1}`,
		`{"type":"file","format":"base64","content":"aGk=","chunk":-1}`,
		`{"chunk":null,"content":null,"type":null}`,
		`{"copy_from":"a.ipynb","ext":".py"}`,
		`{"path":"x","path":"y","content":1,"content":[2]}`,
		` {"unknown": {"deep": [1, 2, {"x": null}]}, "type": "directory"} `,
		`null`,
		`{}`,
	} {
		var want, got SaveModel
		if err := json.Unmarshal([]byte(body), &want); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if err := DecodeSaveModel([]byte(body), &got); err != nil {
			t.Errorf("%s: %v", body, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", body, got, want)
		}
	}
	for _, body := range []string{
		`{"type":1}`, `{"chunk":1.5}`, `{"chunk":"1"}`, `{"content":}`, `[1]`, `{"type":"notebook"} x`,
		`{"content":"` + "\x01" + `"}`, `{"name":"\q"}`, `"a"`,
	} {
		var m SaveModel
		if err := DecodeSaveModel([]byte(body), &m); err == nil {
			t.Errorf("%q accepted: %+v", body, m)
		}
		if err := json.Unmarshal([]byte(body), &m); err == nil {
			t.Errorf("%q: encoding/json accepts it; the test's list is wrong", body)
		}
	}
}
