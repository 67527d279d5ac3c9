package controller

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/controller/desired"
)

// A member's exports may import at most --member-max-endpoints endpoints
// into each consumer, all services together: --max-imported-endpoints
// bounds one service, and without this a member with 150 exports in a
// namespace every hub has would put 1.5 million endpoints into every
// consumer's CoreDNS. Every consumer of a service gets the same slices,
// so what a member's exports import into any one consumer is at most
// what they import together: that is what is counted.
//
// Its exports are ranked as its export quota ranks them (members/quota.go):
// by their creationTimestamp, then key. The member's word orders only its
// own exports. The oldest keep their place; past the budget, its newest
// are left out of every consumer, `Valid=False` `TooManyEndpoints`, the
// services they already import unchanged. Those left out are always the
// newest, a suffix of the ranking: one export left out leaves out every
// newer one, so that an older export never waits behind a newer one.
//
// An export left out comes back only once its older exports and itself
// take at most nine tenths of the budget: without that margin, an older
// export that grows and shrinks by a pod around the bound would take a
// newer one out of every consumer and back at each step.

// budgetMargin is the part of the budget an export left out waits to be
// free before it comes back.
const budgetMargin = 10

// endpointBudgets keeps, by member, what each of its exports costs, in
// the member's memberState.
type endpointBudgets struct {
	max int // 0: no bound
	// perService is the most one export costs (--max-imported-endpoints);
	// 0: no bound.
	perService int
	mu         sync.Mutex // guards every member's memberBudget
	perMember  *memberStates
}

// memberBudget is one member's exports, by service key.
type memberBudget struct {
	exports map[string]*exportCost
	// dirty are the keys whose cost an event may have changed since it
	// was read, and exports not read yet.
	dirty map[string]bool
	total int // the sum of the costs
	out   int // exports left out
}

type exportCost struct {
	made metav1.Time
	cost int
	out  bool
}

// costRead is what the caches say of a member's export: nil when it has
// none.
type costRead func(key string) (export *mcsv1b1.ServiceExport, cost int)

var exportsOverBudget = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "mcs_member_exports_over_endpoint_budget",
	Help: "ServiceExports of the member cluster left out of every consumer because its older exports import --member-max-endpoints endpoints.",
}, []string{"cluster"})

func init() { legacyregistry.RawMustRegister(exportsOverBudget) }

func newEndpointBudgets(max, perService int, perMember *memberStates) *endpointBudgets {
	return &endpointBudgets{max: max, perService: perService, perMember: perMember}
}

// touched notes an event of the member's export (export set), Service or
// source slices of service key: its cost is read again before it counts.
// An export event of a key not counted yet counts it from then on. When
// key is another replica's (mine says which are this one's) and one
// export's change may move the member across its budget, it returns a
// service of this replica's that the member exports: its sync places the
// member's exports anew here too. A member further from its budget than
// one export can cost queues nothing, so that other shards' changes cost
// this replica no syncs.
func (b *endpointBudgets) touched(cluster, key string, export bool, mine func(string) bool) (sync string) {
	if b.max <= 0 {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	mb := b.of(cluster)
	if _, ok := mb.exports[key]; !ok && !export {
		return ""
	}
	mb.dirty[key] = true
	if mine(key) || mb.out == 0 && b.perService > 0 && mb.total+b.perService <= b.max {
		return ""
	}
	for k := range mb.exports {
		if mine(k) {
			return k
		}
	}
	return ""
}

// forget drops the metric of a member that left, once a place under way
// has set it; its memberBudget goes with its memberState.
func (b *endpointBudgets) forget(cluster string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	exportsOverBudget.DeleteLabelValues(cluster)
}

func (b *endpointBudgets) of(cluster string) *memberBudget { return b.perMember.of(cluster).endpoints }

// place records what the member's export of service key costs as a sync
// read it, and returns whether key is left out and the other keys whose
// place moved, which must be synced again. Before it ranks, it reads from
// the caches (read) the member's exports never read, and those an event
// changed that no sync of this replica reads (stale: another shard's);
// this replica's own are read by the syncs their events queue.
func (b *endpointBudgets) place(cluster, key string, export *mcsv1b1.ServiceExport, cost int, read costRead, stale func(key string) bool) (out bool, moved []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	mb := b.of(cluster)
	mb.set(key, export, cost)
	for k := range mb.dirty {
		if _, known := mb.exports[k]; !known || stale(k) {
			e, c := read(k)
			mb.set(k, e, c)
		}
	}
	moved = mb.settle(b.max)
	exportsOverBudget.WithLabelValues(cluster).Set(float64(mb.out))
	e := mb.exports[key]
	return e != nil && e.out, slices.DeleteFunc(moved, func(k string) bool { return k == key })
}

// set records an export's cost, or its absence. An export this run has
// not counted yet starts where its condition says the last run left it,
// so that a restart moves nothing.
func (mb *memberBudget) set(key string, export *mcsv1b1.ServiceExport, cost int) {
	delete(mb.dirty, key)
	e := mb.exports[key]
	if e != nil {
		mb.total -= e.cost
	}
	if export == nil {
		if e != nil && e.out {
			mb.out--
		}
		delete(mb.exports, key)
		return
	}
	if e == nil {
		e = &exportCost{out: leftOut(export)}
		if e.out {
			mb.out++
		}
		mb.exports[key] = e
	}
	e.made, e.cost = export.CreationTimestamp, cost
	mb.total += cost
}

// leftOut reports whether the export says it was left out for its budget.
func leftOut(export *mcsv1b1.ServiceExport) bool {
	c := meta.FindStatusCondition(export.Status.Conditions, string(mcsv1b1.ServiceExportConditionValid))
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == string(desired.ReasonTooManyEndpoints)
}

// settle decides which exports are left out, and returns those whose
// place changed. A member within its budget with none left out pays for
// no ranking.
func (mb *memberBudget) settle(budget int) (moved []string) {
	if mb.out == 0 && mb.total <= budget {
		return nil
	}
	ranked := slices.SortedFunc(maps.Keys(mb.exports), func(a, b string) int {
		return cmp.Or(mb.exports[a].made.Compare(mb.exports[b].made.Time), cmp.Compare(a, b))
	})
	sum, cut := 0, false
	for _, k := range ranked {
		e := mb.exports[k]
		sum += e.cost
		limit := budget
		if e.out {
			limit -= budget / budgetMargin
		}
		cut = cut || sum > limit
		if out := cut && e.cost > 0; out != e.out {
			e.out = out
			if out {
				mb.out++
			} else {
				mb.out--
			}
			moved = append(moved, k)
		}
	}
	return moved
}

// budgetEndpoints places each known member's export of the service within
// its budget, and says in the input which are left out. Services whose
// exports it moves across the bound are queued.
func (c *Controller) budgetEndpoints(in *desired.Input) {
	if c.endpoints.max <= 0 {
		return
	}
	key := in.Namespace + "/" + in.Name
	for cluster, m := range in.Members {
		if !m.Known {
			continue
		}
		out, moved := c.endpoints.place(cluster, key, m.Export, desired.ExportCost(m, in.MaxEndpoints, in.MaxPorts),
			c.readCost(cluster, in.MaxEndpoints, in.MaxPorts), func(k string) bool { return !c.mineKey(k) })
		if out {
			m.OverBudget = fmt.Sprintf("%s's exports import more than %d endpoints into each consumer (mcs-controller --member-max-endpoints), and this one is among its newest: it is not used until older ones leave room", cluster, c.endpoints.max)
			in.Members[cluster] = m
		}
		for _, k := range moved {
			if c.mineKey(k) {
				c.queue.Add(k)
			}
		}
	}
}

// readCost reads a member's export of a service from the caches, as a
// sync would.
func (c *Controller) readCost(cluster string, maxEndpoints, maxPorts int) costRead {
	return func(key string) (*mcsv1b1.ServiceExport, int) {
		m := c.member(cluster)
		if m == nil {
			return nil, 0
		}
		namespace, name, _ := cache.SplitMetaNamespaceKey(key)
		dm := c.memberInput(m, namespace, name)
		return dm.Export, desired.ExportCost(dm, maxEndpoints, maxPorts)
	}
}

// costTouched notes an event of a member's Service, ServiceExport or
// source slice of service namespace/name.
func (c *Controller) costTouched(cluster, namespace, name string, export bool) {
	if k := c.endpoints.touched(cluster, namespace+"/"+name, export, c.mineKey); k != "" {
		c.queue.Add(k)
	}
}
