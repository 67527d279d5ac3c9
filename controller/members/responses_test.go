package members

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// A member's list larger than the bound fails with an error that says so,
// before the controller holds it; a watch, read an object at a time, is
// not cut however long it runs.
func TestBoundResponses(t *testing.T) {
	service := func(i int) string {
		return fmt.Sprintf(`{"metadata":{"name":"s%d","namespace":"a","annotations":{"pad":%q}}}`, i, strings.Repeat("x", 100))
	}
	var items []string
	for i := range 20 {
		items = append(items, service(i))
	}
	list := `{"kind":"ServiceList","apiVersion":"v1","metadata":{},"items":[` + strings.Join(items, ",") + `]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "true" {
			for _, s := range items {
				_, _ = fmt.Fprintf(w, `{"type":"ADDED","object":%s}`+"\n", strings.Replace(s, "{", `{"kind":"Service","apiVersion":"v1",`, 1))
			}
			return
		}
		_, _ = w.Write([]byte(list))
	}))
	defer srv.Close()
	was := maxResponseBytes
	t.Cleanup(func() { maxResponseBytes = was })
	list20 := func(limit int64) error {
		maxResponseBytes = limit
		m, err := fromConfig("member1", "test", &rest.Config{Host: srv.URL}, 5, 10)
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.Kube.CoreV1().Services("").List(context.Background(), metav1.ListOptions{})
		return err
	}
	if err := list20(int64(len(list))); err != nil {
		t.Fatalf("a list of exactly the bound: %v", err)
	}
	if err := list20(1024); err == nil || !strings.Contains(err.Error(), "the answer to GET /api/v1/services is larger than 1Ki") {
		t.Fatalf("a list past the bound: %v, want it refused", err)
	}

	m, err := fromConfig("member1", "test", &rest.Config{Host: srv.URL}, 5, 10)
	if err != nil {
		t.Fatal(err)
	}
	w, err := m.Kube.CoreV1().Services("").Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i := range items {
		if ev := <-w.ResultChan(); ev.Type != watch.Added {
			t.Fatalf("watch event %d: %+v, want all %d added", i, ev, len(items))
		}
	}
}
