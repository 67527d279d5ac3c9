package mcs

import (
	"fmt"
	"net/http"
	"path"
	"slices"
	"sync"
)

// apiStatus is how the API server answered mcs's requests of late.
type apiStatus string

// In order of gravity: the gauge shows the gravest over the resources.
const (
	apiOK          apiStatus = "ok"          // it answers
	apiForbidden   apiStatus = "forbidden"   // 401 or 403: the credentials or their RBAC
	apiUnreachable apiStatus = "unreachable" // no HTTP answer at all
)

var apiStatuses = []apiStatus{apiOK, apiForbidden, apiUnreachable}

// apiHealth learns from the responses to every request mcs makes whether
// the API server can be reached and lets mcs read, per resource: the
// informers retry a failed list or watch by themselves, so the transport is
// where a failure, and the recovery from it, shows. The last request of a
// resource stands for it: an informer that lost its watch lists again.
type apiHealth struct {
	mu       sync.Mutex
	last     map[string]apiStatus // by resource; "api" for discovery and the ClusterProperty
	status   apiStatus
	onChange func(s apiStatus, why string) // called under mu, on every change of status
}

func newAPIHealth() *apiHealth {
	h := &apiHealth{last: map[string]apiStatus{}, status: apiOK}
	setAPIStatus(apiOK)
	return h
}

// wrap is a rest.Config WrapTransport.
func (h *apiHealth) wrap(rt http.RoundTripper) http.RoundTripper {
	return observed{next: rt, h: h}
}

type observed struct {
	next http.RoundTripper
	h    *apiHealth
}

// RoundTrip implements http.RoundTripper.
func (o observed) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := o.next.RoundTrip(req)
	if req.Context().Err() == nil { // not mcs stopping
		o.h.observe(req, resp, err)
	}
	return resp, err
}

func (h *apiHealth) observe(req *http.Request, resp *http.Response, err error) {
	s, why := apiOK, ""
	switch {
	case err != nil:
		s, why = apiUnreachable, fmt.Sprintf("%s %s: %v", req.Method, req.URL.Path, err)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		s, why = apiForbidden, fmt.Sprintf("%s %s: %s", req.Method, req.URL.Path, resp.Status)
	}
	resource := path.Base(req.URL.Path)
	if !slices.Contains(watchedResources, resource) {
		resource = "api"
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last[resource] = s
	worst := apiOK
	for _, r := range h.last {
		if slices.Index(apiStatuses, r) > slices.Index(apiStatuses, worst) {
			worst = r
		}
	}
	if worst == h.status {
		return
	}
	h.status = worst
	setAPIStatus(worst)
	if h.onChange != nil {
		h.onChange(worst, why)
	}
}
