package labtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterIP waits up to timeout until cluster has Service ns/name with a
// ClusterIP, and returns it.
func (l *Lab) ClusterIP(t testing.TB, cluster, ns, name string, timeout time.Duration) string {
	t.Helper()
	var ip string
	Eventually(t, timeout, func(ctx context.Context) error {
		s, err := l.Client(t, cluster).CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ip = s.Spec.ClusterIP; ip == "" {
			return fmt.Errorf("%s: Service %s/%s has no ClusterIP yet", cluster, ns, name)
		}
		return nil
	})
	return ip
}
