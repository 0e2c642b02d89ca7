package contents

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"unicode/utf8"

	"github.com/nbkube/nbkube/internal/jsonspan"
	"github.com/nbkube/nbkube/internal/jupyter"
)

// streamFromSize is the size from which GetStream streams a file's content: below it, holding
// the file and its encoding costs less than a second pass over it, and a few hundred KiB per
// request is what every answer costs anyway.
const streamFromSize = 1 << 20

// streamChunk is how many bytes of the file a streamed content reads at a time: 1,024 lines of
// base64 (57 bytes each), so that every chunk but the last ends a line.
const streamChunk = 1024 * base64LineBytes

// base64LineBytes is how many bytes Python's encodebytes encodes per line of 76 characters.
const base64LineBytes = 57

// errChangedWhileRead says a file changed in place between its passes: the answer, whose
// start is already sent, cannot be the one its format and mimetype announced.
var errChangedWhileRead = errors.New("file changed while it was read")

// GetStream is Get for an answer written as a stream (jupyter.ContentsModel.WriteJSON). The
// model of a file of streamFromSize bytes or more, asked with its content, carries a
// jupyter.StreamedContent that reads and encodes the open file as the model is written,
// instead of the file and its encodings in memory: for a 64 MiB file, kilobytes instead of
// several hundred MiB. The hash of a file or notebook asked without its content is taken
// reading the file through it, not into memory. Anything else is Get's model.
//
// Errors Jupyter answers (not UTF-8 asked as text, too large) are found before the model is
// returned: a file asked as text or in the default format is read once to check that it is
// UTF-8, then again as it is written. An error writing the content means the answer is cut
// short (the file could not be read, or changed in place between the passes so that it is no
// longer UTF-8 or grew past MaxReadSize): its status is already sent.
//
// release closes the file; it is never nil and must be called once the model is written.
func (s *Store) GetStream(_ context.Context, path string, o GetOptions) (m *jupyter.ContentsModel, release func(), err error) {
	p, st, typ, err := s.resolve(path, o)
	if err != nil {
		return nil, nop, err
	}
	hashOnly := typ != jupyter.TypeDirectory && !o.Content && o.Hash
	if streamed := hashOnly || typ == jupyter.TypeFile && o.Content; !streamed || st.size < s.streamFrom {
		m, err := s.getResolved(p, st, typ, o)
		return m, nop, err
	}
	f, st, err := s.openRegular(p)
	if err != nil {
		return nil, nop, err
	}
	if hashOnly {
		defer f.Close()
		m, err := s.hashedModel(p, f, st, typ)
		return m, nop, err
	}
	m, err = s.streamedModel(p, f, st, o)
	if err != nil {
		f.Close()
		return nil, nop, err
	}
	return m, func() { f.Close() }, nil
}

func nop() {}

// streamedModel is the model of the file p, open as f (st), whose content is read from f as
// the model is written.
func (s *Store) streamedModel(p string, f *os.File, st statInfo, o GetOptions) (*jupyter.ContentsModel, error) {
	limit := s.opts.MaxReadSize
	if st.size > limit {
		return nil, tooLarge(p, limit)
	}
	isUTF8 := false
	if o.Format != jupyter.FormatBase64 {
		n, err := eachRunes(io.NewSectionReader(f, 0, limit+1), make([]byte, streamChunk), func(chunk []byte) error {
			if !utf8.Valid(chunk) {
				return errNotUTF8
			}
			return nil
		})
		switch {
		case errors.Is(err, errNotUTF8):
		case err != nil:
			return nil, fsError(p, err)
		case n > limit:
			return nil, tooLarge(p, limit)
		default:
			isUTF8 = true
		}
	}
	format, err := fileFormat(p, o.Format, isUTF8)
	if err != nil {
		return nil, err
	}
	m := s.model(p, st, jupyter.TypeFile, s.writable(p))
	c := &fileContent{f: f, p: p, base64: format == jupyter.FormatBase64, limit: limit}
	if o.Hash {
		alg := "sha256"
		c.sum = sha256.New()
		m.Hash, m.HashAlgorithm = &c.hash, &alg
	}
	m.Content = c
	setFormat(m, format)
	m.ETag = etagOf(st)
	return m, nil
}

// hashedModel is the model of the file or notebook p, open as f (st), with its hash and
// without its content, read through a hash rather than into memory.
func (s *Store) hashedModel(p string, f *os.File, st statInfo, typ string) (*jupyter.ContentsModel, error) {
	limit := s.opts.MaxReadSize
	if st.size > limit {
		return nil, tooLarge(p, limit)
	}
	sum := sha256.New()
	n, err := io.CopyBuffer(sum, io.NewSectionReader(f, 0, limit+1), make([]byte, streamChunk))
	switch {
	case err != nil:
		return nil, fsError(p, err)
	case n > limit:
		return nil, tooLarge(p, limit)
	}
	m := s.model(p, st, typ, s.writable(p))
	h, alg := hex.EncodeToString(sum.Sum(nil)), "sha256"
	m.Hash, m.HashAlgorithm = &h, &alg
	m.ETag = etagOf(st)
	return m, nil
}

// errNotUTF8 ends the check of a file that is not UTF-8.
var errNotUTF8 = errors.New("not UTF-8")

// fileContent is a file's content, encoded as it is read (jupyter.StreamedContent): text as a
// JSON string, or base64 in encodebytes' lines, what Get's model holds in memory.
type fileContent struct {
	f      *os.File
	p      string
	base64 bool
	limit  int64
	// sum, when the hash is asked for, hashes the bytes written; hash is then their SHA-256,
	// which the model's hash points at, known once the content is written.
	sum  hash.Hash
	hash string
}

// WriteJSON writes the content as a JSON string to w, reading the file from its start.
func (c *fileContent) WriteJSON(w io.Writer) error {
	r := io.Reader(io.NewSectionReader(c.f, 0, c.limit+1))
	if c.sum != nil {
		r = io.TeeReader(r, c.sum)
	}
	var (
		n   int64
		err error
	)
	if c.base64 {
		n, err = writeBase64Lines(w, r)
	} else {
		n, err = writeText(w, r)
	}
	switch {
	case err != nil:
		return fmt.Errorf("stream %s: %w", c.p, err)
	case n > c.limit:
		return fmt.Errorf("stream %s: %w", c.p, errChangedWhileRead)
	}
	if c.sum != nil {
		c.hash = hex.EncodeToString(c.sum.Sum(nil))
	}
	return nil
}

// writeBase64Lines writes what r holds as a JSON string of encodeBase64Lines's text (Python's
// encodebytes) and returns how many bytes it read.
func writeBase64Lines(w io.Writer, r io.Reader) (int64, error) {
	in := make([]byte, streamChunk)
	const jsonLine = 76 + 2 // the line and its newline, escaped
	out := make([]byte, 0, streamChunk/base64LineBytes*jsonLine+1)
	out = append(out, '"')
	var total int64
	for {
		k, err := io.ReadFull(r, in)
		total += int64(k)
		for line := in[:k]; len(line) > 0; {
			n := min(len(line), base64LineBytes)
			out = base64.StdEncoding.AppendEncode(out, line[:n])
			out = append(out, '\\', 'n')
			line = line[n:]
		}
		last := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !last {
			return total, err
		}
		if last {
			out = append(out, '"')
		}
		if _, err := w.Write(out); err != nil {
			return total, err
		}
		if last {
			return total, nil
		}
		out = out[:0]
	}
}

// writeText writes what r holds, which must be UTF-8, as a JSON string and returns how many
// bytes it read.
func writeText(w io.Writer, r io.Reader) (int64, error) {
	out := []byte{'"'}
	n, err := eachRunes(r, make([]byte, streamChunk), func(chunk []byte) error {
		if !utf8.Valid(chunk) {
			return errChangedWhileRead
		}
		out = jsonspan.AppendEscaped(out, chunk)
		_, err := w.Write(out)
		out = out[:0]
		return err
	})
	if err != nil {
		return n, err
	}
	_, err = w.Write(append(out, '"'))
	return n, err
}

// eachRunes reads r into buf and calls f with what it read, a chunk at a time, each ending
// between two characters of UTF-8 unless the text ends there (so that a character never
// straddles two chunks); it returns how many bytes it read.
func eachRunes(r io.Reader, buf []byte, f func(chunk []byte) error) (int64, error) {
	var total int64
	carry := 0
	for {
		k, err := io.ReadFull(r, buf[carry:])
		total += int64(k)
		n := carry + k
		last := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !last {
			return total, err
		}
		end := n
		if !last {
			end = completeRunes(buf[:n])
		}
		if end > 0 {
			if err := f(buf[:end]); err != nil {
				return total, err
			}
		}
		if last {
			return total, nil
		}
		carry = copy(buf, buf[end:n])
	}
}

// completeRunes is the length of p without the start of a character of UTF-8 that p cuts off
// at its end.
func completeRunes(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if utf8.FullRune(p[i:]) {
				return len(p)
			}
			return i
		}
	}
	return len(p)
}
