package members

import (
	"slices"
	"strings"
	"testing"

	"github.com/coredns-mcs/coredns-mcs/api"
)

func TestParseExportNamespaces(t *testing.T) {
	bounds := map[string][]string{}
	for _, v := range []string{"member1=shop, web", "member2="} {
		if err := ParseExportNamespaces(bounds, v); err != nil {
			t.Fatalf("%q: %v", v, err)
		}
	}
	if !slices.Equal(bounds["member1"], []string{"shop", "web"}) || bounds["member2"] == nil || len(bounds["member2"]) != 0 {
		t.Errorf("bounds %q, want member1 to shop and web, member2 to none", bounds)
	}
	for _, tc := range []struct{ value, want string }{
		{"member1", "want CLUSTER=NAMESPACE"},
		{"Member_1=shop", `cluster "Member_1"`},
		{"member3=shop,Web", `namespace "Web"`},
		{"member3=shop;demo", `namespace "shop;demo"`},
		{"=shop", `cluster ""`},
		{"member1=other", "bounded twice"},
		{"member3=shop,,other", ""},
	} {
		err := ParseExportNamespaces(bounds, tc.value)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%q: err %v, want %q", tc.value, err, tc.want)
		}
	}
	if !slices.Equal(bounds["member3"], []string{"shop", "other"}) {
		t.Errorf("member3 bounded to %q, want shop and other", bounds["member3"])
	}
}

// The operator's bound and a Secret's annotation both hold: a member may
// export only from the namespaces every bound allows. A bound no member
// Secret can parse refuses the Secret, as any other unusable field does.
func TestExportNamespacesOfSecrets(t *testing.T) {
	kc := kubeconfig("https://127.0.0.1:1", "insecure-skip-tls-verify: false", "token: abc")
	shop := memberSecret("member1", "member1", 100, kc)
	shop.Annotations = map[string]string{api.AnnotationExportNamespaces: "shop,web"}
	none := memberSecret("member2", "member2", 100, kc)
	none.Annotations = map[string]string{api.AnnotationExportNamespaces: ""}
	bad := memberSecret("member3", "member3", 100, kc)
	bad.Annotations = map[string]string{api.AnnotationExportNamespaces: "shop,Web"}
	free := memberSecret("member4", "member4", 100, kc)
	r, _, events := secretRegistryBounded(t, map[string][]string{"member1": {"web", "demo"}, "context1": {"demo"}}, shop, none, bad, free)

	m1 := registeredBy(t, r, "member1", "secret mcs-system/member1")
	for ns, want := range map[string]string{
		"web":  "",
		"shop": "member1 may export only from web, demo (--export-namespaces): it does not provide shop's services",
		"demo": "member1 may export only from shop, web (the annotation mcs.coredns-mcs.io/export-namespaces of its secret mcs-system/member1)",
	} {
		if got := m1.NotAllowed(ns); !strings.HasPrefix(got, want) || (want == "") != (got == "") {
			t.Errorf("member1 in %s: %q, want %q", ns, got, want)
		}
	}
	if got := registeredBy(t, r, "member2", "secret mcs-system/member2").NotAllowed("demo"); !strings.Contains(got, "may export from no namespace") {
		t.Errorf("member2: %q, want it to export from no namespace", got)
	}
	if got := registeredBy(t, r, "member4", "secret mcs-system/member4").NotAllowed("demo"); got != "" {
		t.Errorf("member4, bounded by nothing: %q", got)
	}
	if got := r.get("context1"); got.NotAllowed("demo") != "" || got.NotAllowed("shop") == "" {
		t.Errorf("context1 bounded to demo: demo %q, shop %q", got.NotAllowed("demo"), got.NotAllowed("shop"))
	}
	if _, err := registeredBy(t, r, "member3", "secret mcs-system/member3").Reachable(); err == nil || !strings.Contains(err.Error(), `namespace "Web"`) {
		t.Errorf("member3's error %v, want it to name the namespace", err)
	}
	warned(t, events, "secret mcs-system/member3: annotation mcs.coredns-mcs.io/export-namespaces", `namespace "Web"`)
}
