package members

import (
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/coredns-mcs/coredns-mcs/api/mcsapi"
)

// What the informers keep of each object: their transforms.

// trim is the transform of a member's informers: it drops what no sync
// reads and most memory goes to, and stores v1alpha1 MCS API objects as
// v1beta1 ones.
func trim(obj any) (any, error) {
	dropManagedFields(obj)
	return mcsapi.ToBeta(obj)
}

// TrimHub is the transform of the hub's informers.
func TrimHub(obj any) (any, error) {
	dropManagedFields(obj)
	return obj, nil
}

func dropManagedFields(obj any) {
	if a, err := meta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
}
