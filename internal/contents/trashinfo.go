package contents

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// The names and files of the trash (see trash.go): how an entry's info file is written and
// read, and how user names and file names become names in the trash.

const (
	trashInfoExt = ".trashinfo"
	// trashNameMax bounds the ids made from names, leaving room in a file name (255 bytes)
	// for a "-<n>" suffix and the info file's extension.
	trashNameMax = 200
	// trashDateLayout is the specification's DeletionDate: RFC 3339 without a zone.
	trashDateLayout = "2006-01-02T15:04:05"
)

// trashInfo is the content of an info file.
type trashInfo struct {
	path    string
	deleted time.Time
}

func (ti trashInfo) marshal() []byte {
	return []byte("[Trash Info]\nPath=" + escapeTrashPath(ti.path) + "\nDeletionDate=" + ti.deleted.UTC().Format(trashDateLayout) + "\n")
}

func parseTrashInfo(data []byte) (trashInfo, error) {
	var ti trashInfo
	lines := strings.Split(string(data), "\n")
	if strings.TrimSpace(lines[0]) != "[Trash Info]" {
		return ti, errors.New("no [Trash Info] group")
	}
	var havePath, haveDate bool
	for _, line := range lines[1:] {
		key, value, ok := strings.Cut(strings.TrimSpace(line), "=")
		switch {
		case !ok:
		case key == "Path" && !havePath:
			p, err := url.PathUnescape(value)
			if err != nil {
				return ti, err
			}
			ti.path, havePath = p, true
		case key == "DeletionDate" && !haveDate:
			t, err := time.Parse(trashDateLayout, value)
			if err != nil {
				return ti, err
			}
			ti.deleted, haveDate = t, true
		}
	}
	if !havePath || !haveDate {
		return ti, errors.New("no Path or DeletionDate")
	}
	return ti, nil
}

// escapeTrashPath percent-encodes every byte of p but the unreserved characters of URIs and
// the slashes, as the specification asks of Path.
func escapeTrashPath(p string) string {
	var b strings.Builder
	for i := range len(p) {
		c := p[i]
		if c == '/' || isUnreserved(c) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~'
}

// trashUserDir is the trash directory of user. A user name can hold anything, so it becomes
// one safe file name: letters, digits and "-_.@" are kept, other bytes percent-encoded, a
// leading dot too (no ".", "..", or name that hides); a name too long for a file name is cut
// and completed with a hash of the whole, so that two users never share a trash.
func trashUserDir(user string) string {
	var b strings.Builder
	for i := range len(user) {
		c := user[i]
		if (isUnreserved(c) && c != '~' || c == '@') && (i > 0 || c != '.') {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	name := b.String()
	if len(name) > trashNameMax {
		sum := sha256.Sum256([]byte(user))
		name = name[:trashNameMax-33] + "~" + hex.EncodeToString(sum[:16])
	}
	return trashDir + "/" + name
}

// trashName is the name an entry of the file name takes in the trash: the name itself,
// shortened (at a character boundary, keeping a short extension) when too long to leave
// room for a suffix.
func trashName(name string) string {
	if len(name) <= trashNameMax {
		return name
	}
	base, ext := splitExt(name)
	if len(ext) > 16 {
		base, ext = name, ""
	}
	cut := trashNameMax - len(ext)
	for cut > 0 && !utf8.RuneStart(base[cut]) {
		cut--
	}
	return base[:cut] + ext
}

// validTrashID reports whether id can name an entry: one file name, as the API gave it.
func validTrashID(id string) bool {
	return id != "" && id != "." && id != ".." && utf8.ValidString(id) &&
		!strings.ContainsAny(id, "/\x00") && len(id)+len(trashInfoExt) <= 255
}

// trashPaths are the directories of one user's trash.
type trashPaths struct{ files, info string }

func trashOf(user string) trashPaths {
	dir := trashUserDir(user)
	return trashPaths{files: dir + "/files", info: dir + "/info"}
}

func (t trashPaths) infoFile(id string) string { return t.info + "/" + id + trashInfoExt }
