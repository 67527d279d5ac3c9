package controller

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// ipService is member's Service name of the given families and policy.
func ipService(name string, policy corev1.IPFamilyPolicy, families ...corev1.IPFamily) *corev1.Service {
	s := service(name, false, t0)
	s.Spec.IPFamilyPolicy, s.Spec.IPFamilies = ptr.To(policy), families
	allocate(s, 7)
	return s
}

// derived-<svc> follows the providers' IP families, so an IPv6 or
// dual-stack service gets a VIP of each family it has, and the import's
// spec.ips lists them; a change of families is one write, and a first
// family that changes makes the Service anew (it is immutable).
func TestDualStack(t *testing.T) {
	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
	f := newFixture(t, world{
		m1: {ns1(), ipService("foo", corev1.IPFamilyPolicySingleStack, v6), slice("foo", "foo-1", 1, "fd01::1"), export("foo", t0)},
		m2: {ns1()},
	})
	all := firstImport("foo", "imported-member1-foo-1")
	f.sync("demo/foo")
	expectVIPs(t, f, corev1.IPFamilyPolicySingleStack, v6)

	f.change(m1, ipService("foo", corev1.IPFamilyPolicyPreferDualStack, v6, v4), "update")
	more := []string{"update services demo/derived-foo", "update serviceimports demo/foo", "update serviceimports/status demo/foo"}
	expect(t, "dual-stack", f.sync("demo/foo"), writes{m1: more, m2: more, m3: more})
	expectVIPs(t, f, corev1.IPFamilyPolicyPreferDualStack, v6, v4)
	expect(t, "again", f.sync("demo/foo"), writes{})
	f.restart()
	expect(t, "after a restart", f.sync("demo/foo"), writes{})

	f.change(m1, ipService("foo", corev1.IPFamilyPolicySingleStack, v4), "update")
	anew := slices.Concat([]string{"delete services demo/derived-foo"}, all[1:4])
	expect(t, "IPv4 only", f.sync("demo/foo"), writes{m1: anew, m2: anew, m3: anew})
	expectVIPs(t, f, corev1.IPFamilyPolicySingleStack, v4)
}

// expectVIPs checks member2's derived-foo and the ServiceImport's spec.ips.
func expectVIPs(t *testing.T, f *fixture, policy corev1.IPFamilyPolicy, families ...corev1.IPFamily) {
	t.Helper()
	d := f.serviceOf(m2, "derived-foo")
	if ptr.Deref(d.Spec.IPFamilyPolicy, "") != policy || !slices.Equal(d.Spec.IPFamilies, families) || len(d.Spec.ClusterIPs) != len(families) {
		t.Errorf("derived-foo policy %v families %v IPs %v, want %s %v", ptr.Deref(d.Spec.IPFamilyPolicy, ""), d.Spec.IPFamilies, d.Spec.ClusterIPs, policy, families)
	}
	if imp := f.importOf(m2, "foo"); !slices.Equal(imp.Spec.IPs, d.Spec.ClusterIPs) {
		t.Errorf("import spec.ips %v, want derived-foo's %v", imp.Spec.IPs, d.Spec.ClusterIPs)
	}
}

// A headless import's spec.ipFamilies are its providers' families, the
// oldest's first: it has no VIP, and the MCS API conformance suite reads
// them to know which DNS records to ask for.
func TestHeadlessFamilies(t *testing.T) {
	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
	headless := func(t0 time.Time, families ...corev1.IPFamily) *corev1.Service {
		s := service("foo", true, t0)
		s.Spec.IPFamilyPolicy, s.Spec.IPFamilies = ptr.To(corev1.IPFamilyPolicySingleStack), families
		return s
	}
	f := newFixture(t, world{
		m1: {ns1(), headless(t0, v4), slice("foo", "foo-1", 1, "10.0.1.1"), export("foo", t0)},
		m2: {ns1()},
	})
	f.sync("demo/foo")
	expectFamilies := func(what string, want ...corev1.IPFamily) {
		t.Helper()
		for _, m := range []string{m1, m2, m3} {
			if imp := f.importOf(m, "foo"); !slices.Equal(imp.Spec.IPFamilies, want) || len(imp.Spec.IPs) > 0 {
				t.Errorf("%s: %s's import: families %v, IPs %v; want %v and no IPs", what, m, imp.Spec.IPFamilies, imp.Spec.IPs, want)
			}
		}
	}
	expectFamilies("IPv4", v4)
	expect(t, "again", f.sync("demo/foo"), writes{})

	f.change(m2, headless(t0.Add(time.Hour), v6), "create")
	f.change(m2, export("foo", t0.Add(time.Hour)), "create")
	f.sync("demo/foo")
	expectFamilies("and IPv6 from a younger export", v4, v6)
	expect(t, "again", f.sync("demo/foo"), writes{})
}
