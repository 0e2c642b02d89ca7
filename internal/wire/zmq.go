package wire

import (
	"fmt"
)

// signedFrames is the number of frames from the signature to the content.
const signedFrames = 5

// DecodeZMQ decodes a ZMQ multipart message,
//
//	[identities..., "<IDS|MSG>", hmac-hex, header, parent_header, metadata, content, buffers...]
//
// verifying its signature with s before looking at the JSON. The Message's fields alias
// frames (nothing is copied). As in jupyter_client, the first delimiter frame ends the
// identities.
func DecodeZMQ(frames [][]byte, s *Signer, lim Limits) (*Message, error) {
	if len(frames) > lim.frames() {
		return nil, fmt.Errorf("%w: %d frames, limit %d", ErrTooLarge, len(frames), lim.frames())
	}
	total, delim := 0, -1
	for i, f := range frames {
		total += len(f)
		if delim < 0 && string(f) == Delimiter {
			delim = i
		}
	}
	if total > lim.bytes() {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, total, lim.bytes())
	}
	if delim < 0 {
		return nil, ErrNoDelimiter
	}
	rest := frames[delim+1:]
	if len(rest) < signedFrames {
		return nil, fmt.Errorf("%w: %d frames after the delimiter, want at least %d", ErrMalformed, len(rest), signedFrames)
	}
	if !s.Verify(rest[0], rest[1], rest[2], rest[3], rest[4]) {
		return nil, ErrBadSignature
	}
	m := &Message{}
	if delim > 0 {
		m.Identities = frames[:delim:delim]
	}
	var err error
	if m.Header, err = object("header", rest[1]); err != nil {
		return nil, err
	}
	if m.ParentHeader, err = object("parent_header", rest[2]); err != nil {
		return nil, err
	}
	if m.Metadata, err = object("metadata", rest[3]); err != nil {
		return nil, err
	}
	if m.Content, err = object("content", rest[4]); err != nil {
		return nil, err
	}
	if len(rest) > signedFrames {
		m.Buffers = rest[signedFrames:len(rest):len(rest)]
	}
	return m, nil
}

// EncodeZMQ returns m's frames, signed with s: identities, delimiter, signature, the four
// dicts, buffers. The frames alias m's fields.
func EncodeZMQ(m *Message, s *Signer) [][]byte {
	header, parent, metadata, content := orEmpty(m.Header), orEmpty(m.ParentHeader), orEmpty(m.Metadata), orEmpty(m.Content)
	frames := make([][]byte, 0, len(m.Identities)+1+signedFrames+len(m.Buffers))
	frames = append(frames, m.Identities...)
	frames = append(frames, []byte(Delimiter), s.Sign(header, parent, metadata, content), header, parent, metadata, content)
	return append(frames, m.Buffers...)
}
