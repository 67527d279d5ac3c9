package members

import (
	"fmt"
	"io"
	"net/http"

	"k8s.io/apimachinery/pkg/api/resource"
)

// maxResponseBytes bounds a member's answer that is not a watch: a list
// is read whole before any of it is decoded, so an API server answering
// with more would make the controller hold all of it at once. A watch
// needs no such bound: client-go reads it one object at a time, each at
// most 16 MiB, and Options.MaxObjects bounds how many are kept.
// A variable, so that a test can make a member whose bound it can pass.
var maxResponseBytes int64 = 256 << 20

// boundResponses makes every answer that is not a watch fail once it
// passes limit bytes.
func boundResponses(limit int64) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := next.RoundTrip(req)
			if err != nil || req.URL.Query().Get("watch") == "true" {
				return resp, err
			}
			resp.Body = &boundedBody{ReadCloser: resp.Body, left: limit, limit: limit, what: req.Method + " " + req.URL.Path}
			return resp, nil
		})
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

type boundedBody struct {
	io.ReadCloser
	left, limit int64
	what        string
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more says whether the answer really goes on.
		if n, _ := b.ReadCloser.Read(make([]byte, 1)); n > 0 {
			return 0, fmt.Errorf("the answer to %s is larger than %s: refused, as a member may not make the controller hold that much at once", b.what, resource.NewQuantity(b.limit, resource.BinarySI))
		}
		return b.ReadCloser.Read(p)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
