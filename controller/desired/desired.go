// Package desired computes, for one service, what every member cluster
// should hold: which clusters provide and consume it, the ServiceImport's
// shape, the imported EndpointSlices and the Services propagated from the
// hub. It reads nothing and writes nothing, so it is tested and fuzzed on
// its own; the controller gathers its Input from caches and applies its Plan.
package desired

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/controller/shards"
)

// Input is what the caches say about one service, namespace/name.
type Input struct {
	Namespace, Name string
	// MCS is the hub's MultiClusterService of that name; nil when there is
	// none or it is being deleted.
	MCS *v1alpha1.MultiClusterService
	// HubService is the hub's Service of that name, or nil.
	HubService *corev1.Service
	// Protected, when set, says why the operator does not let the service
	// be exported (the API server's Service, a system namespace).
	Protected string
	// Members holds every registered member by name.
	Members map[string]Member
	// Left are clusters that were members and left (deregistered, or
	// retiring): a spec that names one is followed without it.
	Left []string
	// Deleting: the MultiClusterService of that name is being deleted
	// (MCS is then nil); see Plan.Deleting.
	Deleting bool
	// MaxEndpoints bounds the endpoints imported from one provider (0: no
	// bound): a member's export costs every consumer's API server, kube-
	// proxy and CoreDNS in proportion to it.
	MaxEndpoints int
	// MaxPorts bounds the ports of an import (0: no bound): kube-proxy
	// programs each port of derived-<svc> for each endpoint.
	MaxPorts int
}

// Member is what one member cluster holds of the service.
type Member struct {
	// Known: the member's caches have synced, so what is absent below is
	// really absent. Nothing is inferred from an unknown member.
	Known bool
	// Service is the member's own Service of that name (the user's or one
	// propagated from the hub), or nil.
	Service *corev1.Service
	// Export is the member's ServiceExport of that name, or nil.
	Export *mcsv1b1.ServiceExport
	// Slices are the member's own EndpointSlices of the service, never
	// the ones mcs-controller imported.
	Slices []*discoveryv1.EndpointSlice
	// NotAllowed, when set, says why the member may not export from the
	// service's namespace: the operator bounds where it exports from.
	NotAllowed string
	// OverQuota, when set, says why the member's export of the service is
	// not used: it exports more services than it may (members/quota.go).
	OverQuota string
	// OverBudget, when set, says why the member's export of the service is
	// not used: what its older exports import passes its endpoint budget.
	OverBudget string
	// Stale: the member has been unhealthy for as long as its Lease
	// source-<member> lasts (stale.go). Set whether it is Known or not.
	Stale bool
	// FirstSeen is when the controller first saw the member provide the
	// service, as the hub keeps it; zero: not yet, which is newer than
	// any time. It ages the export, never what the member reports.
	FirstSeen time.Time
}

// Plan is what every member should hold.
type Plan struct {
	// Invalid, when set, says why the MultiClusterService cannot be
	// followed; nothing is to change until it is fixed.
	Invalid string
	// Unexportable, when set, says why no member can export the service
	// (its name cannot have a derived Service, or it is protected): its
	// ServiceExports are told so, and nothing is imported.
	Unexportable *Cause
	// Native are the ServiceImport annotations that enable native names
	// (api.NativeAnnotations: the strategy, and LocalFirst's policy when
	// set) while a MultiClusterService exists; nil when none does.
	Native map[string]string
	// Provision and Consumption are the clusters, sorted.
	Provision, Consumption []string
	// Unknown are members whose caches have not synced: their imported
	// slices stay as they are, and they receive nothing.
	Unknown []string
	// Import is the ServiceImport every consumption cluster gets; nil when
	// no provision cluster has the Service (then consumers get nothing).
	Import *Import
	// Providers are the providers in LocalFirst's failover order that
	// have the Service: every consumption cluster gets a provider Service
	// for each (providers.go).
	Providers []string
	// Slices are the imported slices every consumption cluster gets, by
	// their name; the same for all. The copies that the provider
	// Services route to are among them.
	Slices []*discoveryv1.EndpointSlice
	// Skipped says which source slices were not imported, and why.
	Skipped []string
	// Stale are the stale members, and ReadyElsewhere says whether a
	// provider that is not stale has a ready endpoint: then the stale
	// ones' imported endpoints are not ready (stale.go).
	Stale          []string
	ReadyElsewhere bool
	// Conflicts holds, by provision cluster, why its Service lost to an
	// older export's (mcs-api reason and message).
	Conflicts map[string]Cause
	// NotAllowed holds, by member, why it does not provide although it
	// exports the service or is named to: it may not export from the
	// namespace.
	NotAllowed map[string]Cause
	// Propagate holds, by member, the Service to propagate from the hub;
	// members absent here must not hold a propagated one.
	Propagate map[string]*corev1.Service
	// LeftProvision and LeftConsumption are the clusters the spec names
	// in each list that have left: it is followed without them.
	LeftProvision, LeftConsumption []string
	// Deleting: the MultiClusterService is being deleted, so what it
	// caused goes from every member that can be reached, whatever members
	// whose caches have not synced may hold.
	Deleting bool
}

// Import is the shape of the ServiceImport and the derived Service.
type Import struct {
	Headless bool
	Ports    []mcsv1b1.ServicePort
	Clusters []string // provision clusters that have the Service
	// IPFamilyPolicy and IPFamilies are the derived Service's (families.go);
	// nil when no provider states its families.
	IPFamilyPolicy *corev1.IPFamilyPolicy
	IPFamilies     []corev1.IPFamily
	// HeadlessFamilies are a headless import's spec.ipFamilies: every
	// family the providers' Services have, the oldest's first. Without a
	// VIP, they are the families of the endpoints DNS answers.
	HeadlessFamilies []corev1.IPFamily
	// Traffic is the oldest export's (traffic.go); unset when headless.
	Traffic Traffic
	// Labels and Annotations are the oldest export's exportedLabels and
	// exportedAnnotations (exported.go), for the controller's ServiceImports.
	Labels, Annotations map[string]string
}

// Cause is a ServiceExport condition's reason and message: why a
// provision cluster's Service lost to an older one, or why it is not
// exported.
type Cause struct {
	Reason  mcsv1b1.ServiceExportConditionReason
	Message string
}

// Consumes reports whether cluster is a consumption cluster.
func (p *Plan) Consumes(cluster string) bool { return slices.Contains(p.Consumption, cluster) }

// TakesPart reports whether cluster provides or consumes the service, or
// gets the hub's Service.
func (p *Plan) TakesPart(cluster string) bool {
	return p.Consumes(cluster) || slices.Contains(p.Provision, cluster) || p.Propagate[cluster] != nil
}

// IsUnknown reports whether cluster's caches have not synced.
func (p *Plan) IsUnknown(cluster string) bool { return slices.Contains(p.Unknown, cluster) }

// Compute makes the plan for in.
func Compute(in *Input) *Plan {
	p := &Plan{Conflicts: map[string]Cause{}, NotAllowed: map[string]Cause{}, Propagate: map[string]*corev1.Service{}, Deleting: in.Deleting}
	for _, name := range slices.Sorted(maps.Keys(in.Members)) {
		if !in.Members[name].Known {
			p.Unknown = append(p.Unknown, name)
		}
	}
	if why := unexportable(in); why != nil {
		p.Unexportable = why
		if in.MCS != nil {
			p.Invalid = why.Message
		}
		return p
	}
	if msg := validate(in); msg != "" {
		p.Invalid = msg
		return p
	}
	p.Provision, p.Consumption = clusters(in)
	p.Provision, p.LeftProvision = present(in, p.Provision)
	p.Consumption, p.LeftConsumption = present(in, p.Consumption)
	p.Provision = p.allowed(in, p.Provision)
	p.notListed(in)
	if in.MCS != nil {
		p.Native = native(in.MCS.Spec)
		if in.HubService != nil {
			for _, c := range union(p.Provision, p.Consumption) {
				p.Propagate[c] = propagated(in.HubService)
			}
		}
	}
	p.Import = p.shape(in)
	if p.Import != nil {
		p.Slices, p.Skipped = importedSlices(in, p.Import)
		p.markStale(in)
		if in.MCS != nil {
			p.Providers = providers(in.MCS.Spec, p.Import)
			p.Slices = append(p.Slices, providerSlices(in.Name, p.Slices, p.Providers)...)
		}
	}
	return p
}

// Reasons of a ServiceExport's Valid=False that the MCS API names none for.
const (
	ReasonInvalidServiceName  mcsv1b1.ServiceExportConditionReason = "InvalidServiceName"
	ReasonProtected           mcsv1b1.ServiceExportConditionReason = "Protected"
	ReasonNamespaceNotAllowed mcsv1b1.ServiceExportConditionReason = "NamespaceNotAllowed"
	ReasonNotProvisionCluster mcsv1b1.ServiceExportConditionReason = "NotProvisionCluster"
	ReasonTooManyExports      mcsv1b1.ServiceExportConditionReason = "TooManyExports"
	ReasonTooManyEndpoints    mcsv1b1.ServiceExportConditionReason = "TooManyEndpoints"
	ReasonTooManyPorts        mcsv1b1.ServiceExportConditionReason = "TooManyPorts"
)

// unexportable says why no member may export the service, or nil. A
// Service name may have 63 characters, derived-<name> then 71: there would
// be no derived Service to give the ServiceImport its VIP, nor to name the
// imported slices after.
func unexportable(in *Input) *Cause {
	if errs := validation.IsDNS1035Label(api.DerivedPrefix + in.Name); len(errs) > 0 {
		return &Cause{ReasonInvalidServiceName, fmt.Sprintf("service name %q cannot have a Service %s%s (at most %d characters): %s", in.Name, api.DerivedPrefix, in.Name, validation.DNS1035LabelMaxLength-len(api.DerivedPrefix), errs[0])}
	}
	if in.Protected != "" {
		return &Cause{ReasonProtected, in.Protected}
	}
	return nil
}

// validate checks what the API server may not have: the CRD can be older
// than this controller, or installed without validation.
func validate(in *Input) string {
	if in.MCS == nil {
		return ""
	}
	spec := in.MCS.Spec
	if len(spec.Types) == 0 {
		return "spec.types is empty: want [CrossCluster]"
	}
	for _, t := range spec.Types {
		if t != v1alpha1.CrossCluster {
			return fmt.Sprintf("spec.types: unknown type %q, want CrossCluster", t)
		}
	}
	if _, ok := api.ParseStrategy(string(spec.Strategy)); !ok && spec.Strategy != "" {
		return fmt.Sprintf("spec.strategy: unknown strategy %q, want %s or %s", spec.Strategy, api.RemoteAndLocal, api.LocalFirst)
	}
	if msg := validateLocalFirst(spec); msg != "" {
		return msg
	}
	lists := map[string][]v1alpha1.ClusterName{"spec.serviceProvisionClusters": spec.ServiceProvisionClusters, "spec.serviceConsumptionClusters": spec.ServiceConsumptionClusters}
	if spec.LocalFirst != nil {
		lists["spec.localFirst.failoverOrder"] = spec.LocalFirst.FailoverOrder
	}
	for field, list := range lists {
		for _, c := range list {
			if _, ok := in.Members[string(c)]; !ok && !slices.Contains(in.Left, string(c)) {
				return fmt.Sprintf("%s: unknown cluster %q (members: %s)", field, c, strings.Join(slices.Sorted(maps.Keys(in.Members)), ", "))
			}
		}
	}
	return ""
}

// clusters picks provision and consumption clusters. A ServiceExport makes
// its member a provision cluster; a MultiClusterService adds its provision
// list (empty: every member with the Service) and narrows consumption
// (empty: every member).
func clusters(in *Input) (provision, consumption []string) {
	all := slices.Sorted(maps.Keys(in.Members))
	set := map[string]bool{}
	if listed(in) == nil {
		for name, m := range in.Members {
			if m.Export != nil && m.Service != nil {
				set[name] = true
			}
		}
	}
	consumption = all
	if in.MCS != nil {
		if l := listed(in); len(l) > 0 {
			for _, c := range l {
				set[string(c)] = true
			}
		} else {
			for name, m := range in.Members {
				if m.Service != nil {
					set[name] = true
				}
			}
		}
		if l := in.MCS.Spec.ServiceConsumptionClusters; len(l) > 0 {
			consumption = v1alpha1.Names(l)
		}
	}
	return slices.Sorted(maps.Keys(set)), consumption
}

// listed is the MultiClusterService's provision list, or nil. A list is
// authoritative: the clusters it names provide, and no other, by a
// ServiceExport or otherwise, so that a member cannot add itself to a
// service the operator named its providers for.
func listed(in *Input) []v1alpha1.ClusterName {
	if in.MCS == nil {
		return nil
	}
	return in.MCS.Spec.ServiceProvisionClusters
}

// notListed notes each member that exports the service but is not in the
// MultiClusterService's provision list: its export is not used.
func (p *Plan) notListed(in *Input) {
	l := listed(in)
	if len(l) == 0 {
		return
	}
	for name, m := range in.Members {
		if m.Export != nil && !slices.Contains(l, v1alpha1.ClusterName(name)) && p.NotAllowed[name].Reason == "" {
			p.NotAllowed[name] = Cause{ReasonNotProvisionCluster, fmt.Sprintf(
				"%s exports %s/%s, but the MultiClusterService of that name lists its provision clusters (spec.serviceProvisionClusters) without %s: the export is not used", name, in.Namespace, in.Name, name)}
		}
	}
}

// present splits clusters into the members and those that left. A list
// that names only clusters that left is then empty: it names no cluster,
// which is not the empty list of the spec, "every member".
func present(in *Input, clusters []string) (members, left []string) {
	for _, c := range clusters {
		if _, ok := in.Members[c]; ok {
			members = append(members, c)
		} else {
			left = append(left, c)
		}
	}
	return members, left
}

// allowed keeps the provision clusters that may export from the service's
// namespace, and within their quota of exports, and notes why each other
// one does not provide: a member the operator bounds publishes nothing,
// nor makes the namespace in consumers.
func (p *Plan) allowed(in *Input, provision []string) []string {
	return slices.DeleteFunc(provision, func(c string) bool {
		m := in.Members[c]
		switch {
		case m.NotAllowed != "":
			p.NotAllowed[c] = Cause{ReasonNamespaceNotAllowed, m.NotAllowed}
		case m.OverQuota != "" && m.Export != nil:
			p.NotAllowed[c] = Cause{ReasonTooManyExports, m.OverQuota}
		case tooManyPorts(m.Service, in.MaxPorts):
			p.NotAllowed[c] = Cause{ReasonTooManyPorts, fmt.Sprintf("%s's Service %s/%s has %d ports, more than the %d an import may have (mcs-controller --max-imported-ports): it is not used", c, in.Namespace, in.Name, len(m.Service.Spec.Ports), in.MaxPorts)}
		case m.OverBudget != "" && m.Export != nil:
			p.NotAllowed[c] = Cause{ReasonTooManyEndpoints, m.OverBudget}
		default:
			return false
		}
		return true
	})
}

func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// propagated is the hub Service as a member gets it: its selector and
// ports, headless or not; addresses are the member's to allocate.
func propagated(hub *corev1.Service) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: hub.Namespace, Name: hub.Name, Labels: map[string]string{
			api.LabelManagedBy: api.ManagedBy, api.LabelBucket: shards.Label(hub.Namespace, hub.Name),
		}},
		Spec: corev1.ServiceSpec{
			Selector: hub.Spec.Selector,
			Ports:    slices.Clone(hub.Spec.Ports),
			Type:     corev1.ServiceTypeClusterIP,
		},
	}
	for i := range s.Spec.Ports {
		s.Spec.Ports[i].NodePort = 0
	}
	if IsHeadless(hub) {
		s.Spec.ClusterIP = corev1.ClusterIPNone
	}
	return s
}

// native is the annotations that turn native names on, as spec says.
func native(spec v1alpha1.MultiClusterServiceSpec) map[string]string {
	out := map[string]string{api.AnnotationStrategy: string(cmp.Or(spec.Strategy, api.RemoteAndLocal))}
	if lf := spec.LocalFirst; lf != nil {
		if lf.MinReadyEndpoints != nil {
			out[api.AnnotationMinReadyEndpoints] = strconv.Itoa(int(*lf.MinReadyEndpoints))
		}
		if len(lf.FailoverOrder) > 0 {
			names := make([]string, len(lf.FailoverOrder))
			for i, c := range lf.FailoverOrder {
				names[i] = string(c)
			}
			out[api.AnnotationFailoverOrder] = strings.Join(names, ",")
		}
	}
	return out
}

// validateLocalFirst checks spec.localFirst as the CRD's rules do.
func validateLocalFirst(spec v1alpha1.MultiClusterServiceSpec) string {
	lf := spec.LocalFirst
	switch {
	case lf == nil:
		return ""
	case spec.Strategy != api.LocalFirst:
		return "spec.localFirst applies to strategy LocalFirst only"
	case lf.MinReadyEndpoints != nil && *lf.MinReadyEndpoints < 1:
		return fmt.Sprintf("spec.localFirst.minReadyEndpoints is %d, want at least 1", *lf.MinReadyEndpoints)
	}
	for i, c := range lf.FailoverOrder {
		if slices.Contains(lf.FailoverOrder[:i], c) {
			return fmt.Sprintf("spec.localFirst.failoverOrder names cluster %q twice", c)
		}
		if len(spec.ServiceProvisionClusters) > 0 && !slices.Contains(spec.ServiceProvisionClusters, c) {
			return fmt.Sprintf("spec.localFirst.failoverOrder: %q is not in spec.serviceProvisionClusters", c)
		}
	}
	return ""
}
