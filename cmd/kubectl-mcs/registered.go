package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	inventoryclient "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// memberSources are the flags of the commands that read the whole fleet:
// which members there are. The controller registers a member for each
// member Secret and, with its --cluster-profile-namespace, for each
// ClusterProfile there; these commands read the same, or --members.
type memberSources struct {
	members          []string // --members: nil, the hub's registrations
	profileNamespace string   // --cluster-profile-namespace
}

func (s *memberSources) addMemberFlags(cmd *cobra.Command) {
	cmd.Flags().StringSliceVar(&s.members, "members", nil, "the member clusters (default: the hub's member Secrets, and its ClusterProfiles with --cluster-profile-namespace)")
	cmd.Flags().StringVar(&s.profileNamespace, "cluster-profile-namespace", "", "the namespace of the hub whose ClusterProfiles register members, as the controller's flag of that name says (default: members come from Secrets only)")
}

// registration is what the hub says the members are.
type registration struct {
	names   []string        // sorted, each once
	secrets []corev1.Secret // the member Secrets, for their credentials
}

// registered reads the hub's member Secrets in secretNamespace and, unless
// s.profileNamespace is empty, its ClusterProfiles there: a profile's name
// is its member's, as the controller has it.
func (s *memberSources) registered(ctx context.Context, kube kubernetes.Interface, profiles inventoryclient.Interface, secretNamespace string) (registration, error) {
	secrets, err := kube.CoreV1().Secrets(secretNamespace).List(ctx, metav1.ListOptions{LabelSelector: api.LabelCluster})
	if err != nil {
		return registration{}, fmt.Errorf("the hub: member Secrets in %s: %w", secretNamespace, err)
	}
	r := registration{secrets: secrets.Items}
	for _, sec := range secrets.Items {
		r.names = append(r.names, sec.Labels[api.LabelCluster])
	}
	if s.profileNamespace != "" {
		list, err := profiles.ApisV1alpha1().ClusterProfiles(s.profileNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return registration{}, fmt.Errorf("the hub: ClusterProfiles in %s (--cluster-profile-namespace): %w", s.profileNamespace, err)
		}
		for _, p := range list.Items {
			r.names = append(r.names, p.Name)
		}
	}
	slices.Sort(r.names)
	r.names = slices.Compact(r.names)
	return r, nil
}

// registeredAt is registered through the hub's cfg.
func (s *memberSources) registeredAt(ctx context.Context, cfg *rest.Config, secretNamespace string) (registration, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return registration{}, err
	}
	profiles, err := inventoryclient.NewForConfig(cfg)
	if err != nil {
		return registration{}, err
	}
	return s.registered(ctx, kube, profiles, secretNamespace)
}
