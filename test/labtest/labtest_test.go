package labtest

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestNamespaceName(t *testing.T) {
	for testName, wantPrefix := range map[string]string{
		"TestEndpointSlices/member1": "testendpointslices-member1-",
		"Test_Odd__Name#01":          "test-odd-name-01-",
		strings.Repeat("A", 80):      strings.Repeat("a", 50) + "-",
		"Test/-/":                    "test-",
	} {
		got := namespaceName(testName)
		if !strings.HasPrefix(got, wantPrefix) {
			t.Errorf("namespaceName(%q) = %q, want prefix %q", testName, got, wantPrefix)
		}
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
			t.Errorf("namespaceName(%q) = %q: not a DNS label: %v", testName, got, errs)
		}
	}
}
