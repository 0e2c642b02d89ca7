package nbconvert

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrTooLarge is returned when an export would exceed its output limit.
var ErrTooLarge = errors.New("the export is larger than its limit")

// out is where an exporter writes. It stops at its limit, and tells the exporter's loops when
// the request's context has ended, so that no notebook makes an export unbounded in memory or
// time: loops call check (which costs little) at each cell, output, line and token.
type out struct {
	strings.Builder
	ctx   context.Context
	limit int
	err   error
	n     int // calls since the context was last looked at
}

func newOut(ctx context.Context, limit int) *out {
	return &out{ctx: ctx, limit: limit}
}

// WriteString appends s unless the output is over its limit, which is then the export's error.
func (o *out) WriteString(s string) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	if o.Len()+len(s) > o.limit {
		o.err = fmt.Errorf("%w of %d bytes", ErrTooLarge, o.limit)
		return 0, o.err
	}
	return o.Builder.WriteString(s)
}

// Write appends p like WriteString.
func (o *out) Write(p []byte) (int, error) { return o.WriteString(string(p)) }

// w writes strings, ignoring errors: the first one is kept and returned by check and result.
func (o *out) w(ss ...string) {
	for _, s := range ss {
		_, _ = o.WriteString(s)
	}
}

// check reports the export's error: the output limit reached or the context ended.
func (o *out) check() error {
	if o.err != nil {
		return o.err
	}
	o.n++
	if o.n&63 == 0 || o.n == 1 {
		if err := o.ctx.Err(); err != nil {
			o.err = err
		}
	}
	return o.err
}

// result is the output, or the error that stopped it.
func (o *out) result() ([]byte, error) {
	if o.err == nil {
		o.err = o.ctx.Err()
	}
	if o.err != nil {
		return nil, o.err
	}
	return []byte(o.String()), nil
}
