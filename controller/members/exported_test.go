package members

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsapischeme "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/scheme"

	"github.com/coredns-mcs/coredns-mcs/controller/desired"
	"github.com/coredns-mcs/coredns-mcs/controller/internal/hostilemember"
)

// bulkyExport is ServiceExport i of a tenant, whose exportedAnnotations
// take about 1.4 MB (the API server takes requests of up to 1.5 MiB),
// random, as nothing compresses them, as the member's client decodes it
// from the JSON an API server sends.
func bulkyExport(t testing.TB, i int) *mcsv1b1.ServiceExport {
	t.Helper()
	e := &mcsv1b1.ServiceExport{
		TypeMeta:   metav1.TypeMeta{APIVersion: mcsv1b1.SchemeGroupVersion.String(), Kind: "ServiceExport"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: fmt.Sprintf("junk-%d", i), ResourceVersion: fmt.Sprint(1000 + i)},
		Spec:       mcsv1b1.ServiceExportSpec{ExportedAnnotations: map[string]string{}},
	}
	for k := range 21 {
		random := make([]byte, 48<<10)
		_, _ = rand.Read(random)
		e.Spec.ExportedAnnotations[fmt.Sprintf("note-%d", k)] = base64.StdEncoding.EncodeToString(random)
	}
	data, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := k8sruntime.WithoutVersionDecoder{Decoder: mcsapischeme.Codecs.UniversalDeserializer()}.Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*mcsv1b1.ServiceExport)
}

// A tenant's exports cost the controller what an import may carry of
// their exportedLabels and exportedAnnotations, not what they hold: 20 of
// 1.4 MB each took 25 MiB held, and 250 cut the member off
// (--member-max-mib). Both what is held (the live heap) and what counts
// against --member-max-mib (bytesOf) are bounded.
func TestBulkyExportsHeldBounded(t *testing.T) {
	const exports = 20
	const bound = desired.MaxExportedMetadata + 4<<10 // and what identifies an export
	dictionaries.Clear()
	f := newFleet()
	before := hostilemember.LiveHeap()
	var counted int64
	for i := range exports {
		if err := f.add("member1", bulkyExport(t, i)); err != nil {
			t.Fatal(err)
		}
	}
	held := float64(hostilemember.LiveHeap()) - float64(before)
	for _, obj := range f.members["member1"].exports.Of("").GetStore().List() {
		counted += bytesOf(obj)
		if e := Unpacked(obj).(*mcsv1b1.ServiceExport); e.Annotations[desired.AnnotationExportedCut] == "" {
			t.Errorf("%s holds %d exportedAnnotations, not marked cut", e.Name, len(e.Spec.ExportedAnnotations))
		}
	}
	runtime.KeepAlive(f)
	t.Logf("%d exports of 1.4 MB: %.0f B held, %d B counted, each", exports, held/exports, counted/exports)
	if held/exports > bound || counted/exports > bound {
		t.Errorf("each export takes %.0f B held, %d B counted; want at most %d", held/exports, counted/exports, bound)
	}
}
