package contents

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
)

// randomBytes is n pseudo-random bytes, the same for the same seed.
func randomBytes(n int, seed byte) []byte {
	data := make([]byte, n)
	var s [32]byte
	s[0] = seed
	_, _ = rand.NewChaCha8(s).Read(data)
	return data
}

// Streaming must answer what Get answers, byte for byte, for every file and every query: the
// model written as a stream is compared with Get's, written whole.
func TestGetStream_WritesWhatGetWrites(t *testing.T) {
	s, dir := newTestStore(t, Options{MaxReadSize: 8 << 20})
	s.streamFrom = 0 // stream every file, small ones too
	escapes := "\"quoted\" back\\slash\ttab\r\n\x00\x01\x1f\x7f é ✓ 中 𝄞 \u2028\u2029 end\n"
	// A 4-byte character across the boundary of the first chunk, and a 2-byte one across
	// the second's.
	straddling := strings.Repeat("a", streamChunk-2) + "𝄞" + strings.Repeat("b", streamChunk-3) + "é" + escapes
	files := map[string][]byte{
		"empty.txt":        nil,
		"small.txt":        []byte(escapes),
		"small.bin":        randomBytes(1000, 1),
		"one-line.bin":     randomBytes(base64LineBytes, 2),
		"two-lines.bin":    randomBytes(2*base64LineBytes, 3),
		"line-and-one.bin": randomBytes(base64LineBytes+1, 4),
		"chunk.bin":        randomBytes(streamChunk, 5),
		"chunk-less-1.bin": randomBytes(streamChunk-1, 6),
		"chunk-and-1.bin":  randomBytes(streamChunk+1, 7),
		"chunks.bin":       randomBytes(3*streamChunk, 8),
		"large.bin":        randomBytes(5<<20+13, 9),
		"straddling.txt":   []byte(straddling),
		"large.txt":        bytes.Repeat([]byte(escapes), (5<<20)/len(escapes)),
		// Not UTF-8 only after the first chunk, and only at the very end.
		"late-invalid.txt": append([]byte(strings.Repeat("x", 2*streamChunk)), 0xff, 'y'),
		"cut-char.txt":     append([]byte(strings.Repeat("x", streamChunk)), 0xe2, 0x82),
		"ascii.dat":        []byte("plain ASCII with an unknown extension\n"),
		"image.png":        randomBytes(4000, 10),
		"too-large.bin":    make([]byte, 8<<20+1),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for name := range files {
		for _, o := range []GetOptions{{Hash: true}, {Type: jupyter.TypeNotebook, Hash: true}} {
			// The hash alone, of a file or of a notebook.
			want, wantErr := s.Get(ctx, name, o)
			got, release, gotErr := s.GetStream(ctx, name, o)
			release()
			if wantErr != nil || gotErr != nil {
				if !sameError(gotErr, wantErr) {
					t.Errorf("%s %+v: error %v, want %v", name, o, gotErr, wantErr)
				}
				continue
			}
			wantJSON, _ := want.AppendJSON(nil)
			gotJSON, _ := got.AppendJSON(nil)
			if !bytes.Equal(gotJSON, wantJSON) || got.ETag != want.ETag {
				t.Errorf("%s %+v: model %s (ETag %s), want %s (ETag %s)", name, o, gotJSON, got.ETag, wantJSON, want.ETag)
			}
		}
		for _, format := range []string{"", jupyter.FormatText, jupyter.FormatBase64} {
			for _, hash := range []bool{false, true} {
				o := GetOptions{Format: format, Content: true, Hash: hash}
				want, wantErr := s.Get(ctx, name, o)
				got, release, gotErr := s.GetStream(ctx, name, o)
				if wantErr != nil || gotErr != nil {
					if !sameError(gotErr, wantErr) {
						t.Errorf("%s %+v: error %v, want %v", name, o, gotErr, wantErr)
					}
					release()
					continue
				}
				if _, ok := got.Content.(jupyter.StreamedContent); !ok {
					t.Errorf("%s %+v: content %T is not streamed", name, o, got.Content)
				}
				var buf bytes.Buffer
				if err := got.WriteJSON(&buf); err != nil {
					t.Fatalf("%s %+v: %v", name, o, err)
				}
				release()
				wantJSON, err := want.AppendJSON(nil)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(buf.Bytes(), wantJSON) {
					t.Errorf("%s %+v: streamed model differs from Get's:\n got %.300s\nwant %.300s", name, o, buf.Bytes(), wantJSON)
				}
				if got.ETag != want.ETag {
					t.Errorf("%s %+v: ETag %q, want %q", name, o, got.ETag, want.ETag)
				}
			}
		}
	}
}

// What is not a file's content asked for is Get's model, held in memory.
func TestGetStream_KeepsGetsModelForTheRest(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"nb.ipynb": emptyNotebook, "sub/": "", "big.txt": strings.Repeat("x", streamFromSize),
		"small.txt": strings.Repeat("x", streamFromSize-1)})
	ctx := context.Background()
	for _, c := range []struct {
		path     string
		o        GetOptions
		streamed bool
	}{
		{"big.txt", GetOptions{Content: true}, true},
		{"small.txt", GetOptions{Content: true}, false},
		{"big.txt", GetOptions{}, false},
		{"nb.ipynb", GetOptions{Content: true}, false},
		{"sub", GetOptions{Content: true}, false},
	} {
		m, release, err := s.GetStream(ctx, c.path, c.o)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if _, streamed := m.Content.(jupyter.StreamedContent); streamed != c.streamed {
			t.Errorf("%s %+v: streamed %v, want %v", c.path, c.o, streamed, c.streamed)
		}
		release()
	}
}

// A file changed in place between the check that it is UTF-8 and its streaming must not be
// answered as if it were what the check saw: writing the content fails, which cuts the answer.
func TestGetStream_FileChangedBetweenThePassesFailsTheWrite(t *testing.T) {
	s, dir := newTestStore(t, Options{MaxReadSize: 8 * streamChunk})
	s.streamFrom = 0
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		change func(f *os.File) error
	}{
		{"no longer UTF-8", func(f *os.File) error { _, err := f.WriteAt([]byte{0xff}, streamChunk+5); return err }},
		{"grown past the limit", func(f *os.File) error { _, err := f.WriteAt(make([]byte, 8*streamChunk+1), 0); return err }},
	} {
		p := filepath.Join(dir, "f.txt")
		if err := os.WriteFile(p, bytes.Repeat([]byte("text "), streamChunk), 0o644); err != nil {
			t.Fatal(err)
		}
		m, release, err := s.GetStream(ctx, "f.txt", GetOptions{Format: jupyter.FormatText, Content: true})
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.change(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
		err = m.WriteJSON(&bytes.Buffer{})
		release()
		if !errors.Is(err, errChangedWhileRead) {
			t.Errorf("%s: writing the model: %v, want %v", c.name, err, errChangedWhileRead)
		}
	}
}

// Splitting text into chunks never splits a character, however the bytes fall.
func TestEachRunes_ChunksEndBetweenCharacters(t *testing.T) {
	text := []byte(strings.Repeat("aé✓𝄞", 50))
	for size := utf8.UTFMax; size < 40; size++ {
		var got []byte
		_, err := eachRunes(bytes.NewReader(text), make([]byte, size), func(chunk []byte) error {
			if !utf8.Valid(chunk) {
				t.Errorf("buffer of %d: chunk %q splits a character", size, chunk)
			}
			got = append(got, chunk...)
			return nil
		})
		if err != nil || !bytes.Equal(got, text) {
			t.Errorf("buffer of %d: read %q, %v", size, got, err)
		}
	}
}

// sameError says whether got and want are the same error to a client: the same kind, message
// and reason.
func sameError(got, want error) bool {
	var g, w *domainerr.Error
	return errors.As(got, &g) && errors.As(want, &w) && errors.Is(g.Kind, w.Kind) && g.Message == w.Message && g.Reason == w.Reason
}
