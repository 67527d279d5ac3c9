package main

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	inventory "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	inventoryfake "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned/fake"

	"github.com/coredns-mcs/coredns-mcs/api"
)

func memberSecret(ns, name, cluster string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{api.LabelCluster: cluster}}}
}

func profile(ns, name string) *inventory.ClusterProfile {
	return &inventory.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// The fleet commands find the members the controller registers: every
// member Secret's cluster and, with --cluster-profile-namespace, every
// ClusterProfile's name there; each once, in order; a profile elsewhere,
// or without the flag, is no member.
func TestRegisteredMembersFromSecretsAndProfiles(t *testing.T) {
	kube := kubefake.NewClientset(memberSecret("mcs-system", "member2", "member2"), memberSecret("mcs-system", "member1", "member1"),
		memberSecret("other", "member7", "member7"))
	profiles := inventoryfake.NewSimpleClientset(profile("fleet", "member4"), profile("fleet", "member2"), profile("elsewhere", "member8"))

	for _, c := range []struct {
		namespace string
		want      []string
	}{
		{"", []string{"member1", "member2"}},
		{"fleet", []string{"member1", "member2", "member4"}},
	} {
		s := memberSources{profileNamespace: c.namespace}
		r, err := s.registered(t.Context(), kube, profiles, "mcs-system")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.names, c.want) {
			t.Errorf("--cluster-profile-namespace %q: members %v, want %v", c.namespace, r.names, c.want)
		}
		if len(r.secrets) != 2 {
			t.Errorf("--cluster-profile-namespace %q: %d member Secrets for their credentials, want 2", c.namespace, len(r.secrets))
		}
	}
}

// A ClusterProfile list the hub refuses is an error that names the flag,
// not a fleet without those members.
func TestRegisteredMembersProfilesRefused(t *testing.T) {
	profiles := inventoryfake.NewSimpleClientset()
	profiles.PrependReactor("list", "clusterprofiles", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New(`clusterprofiles is forbidden`)
	})
	s := memberSources{profileNamespace: "fleet"}
	_, err := s.registered(t.Context(), kubefake.NewClientset(), profiles, "mcs-system")
	if err == nil || !strings.Contains(err.Error(), "ClusterProfiles in fleet (--cluster-profile-namespace): clusterprofiles is forbidden") {
		t.Errorf("got %v, want the refusal with the flag named", err)
	}
}
