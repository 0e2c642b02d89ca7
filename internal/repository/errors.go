package repository

import (
	"context"
	"crypto/rand"
	"time"

	"encoding/hex"
	"errors"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ErrInvalid is matched (errors.Is) by the errors of requests that cannot be carried out
// as asked.
var ErrInvalid = errors.New("invalid")

type invalidError struct{ message string }

func (e *invalidError) Error() string        { return e.message }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

// ErrConflict is matched (errors.Is) by the errors of requests the resource's state refuses:
// starting a running cluster, stopping a stopped one.
var ErrConflict = errors.New("conflict")

type conflictError struct{ message string }

func (e *conflictError) Error() string        { return e.message }
func (e *conflictError) Is(target error) bool { return target == ErrConflict }

// validName tells whether id can name a resource at all; asking the API server for one that
// cannot would answer 400 or, with a "/", address another URL.
func validName(id string) bool {
	return len(validation.IsDNS1123Subdomain(id)) == 0
}

// validPath tells whether a relative path stays inside the contents root, as the Kernel
// resource's validation requires.
func validPath(p string) bool {
	if strings.HasPrefix(p, "/") {
		return false
	}
	for _, s := range strings.Split(p, "/") {
		if s == ".." {
			return false
		}
	}
	return true
}

// newUUID is a random UUID (version 4), the shape of Jupyter's kernel and session ids.
func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// waitGone waits (briefly) until the reader no longer shows a deleted object, so that a
// client listing right after a DELETE does not see it again from a lagging cache.
func waitGone(ctx context.Context, r client.Reader, obj client.Object) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	key := client.ObjectKeyFromObject(obj)
	for {
		err := r.Get(ctx, key, obj)
		if apierrors.IsNotFound(err) || ctx.Err() != nil {
			return
		}
		if err == nil && obj.GetDeletionTimestamp() != nil {
			// Going: lists leave it out already.
			return
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return
		}
	}
}

// waitFresh waits (briefly) until the reader shows an object at least as new as the one just
// written, so that a read right after a write sees it.
func waitFresh(ctx context.Context, r client.Reader, written client.Object) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	want, err := strconv.ParseUint(written.GetResourceVersion(), 10, 64)
	if err != nil {
		return
	}
	obj := written.DeepCopyObject().(client.Object)
	for {
		if err := r.Get(ctx, client.ObjectKeyFromObject(written), obj); err != nil {
			return
		}
		if got, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64); err != nil || got >= want {
			return
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return
		}
	}
}
