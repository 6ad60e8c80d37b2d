package controllers

import (
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// Agents use the host network, so a listening agent (a coordinator, a receiver) takes
// one TCP port of its node. Ports come from the endpoint's spec.agentPorts and are
// declared as containerPort = hostPort, so that the scheduler itself refuses to put two
// pods that want the same port on one node. The controller picks the lowest port that
// no dtnflow pod on the node holds; the port then lives in the pod's spec (the source of
// truth after a restart), and an in-memory reservation covers only the moment between
// creating a pod and the cache showing it.

// Every agent also takes a port of the same range for its /metrics and /status, served
// on loopback only: two agents of a node (a job's coordinator and sender, or two jobs'
// receivers) cannot share one fixed address, and the second would serve none.

// metricsPortName names an agent container's metrics port; metricsAddrFlag is the
// agent's flag that takes its address.
const (
	metricsPortName = "metrics"
	metricsAddrFlag = "--metrics-addr"
)

// DefaultAgentPorts is the range used when an endpoint sets no spec.agentPorts.
var DefaultAgentPorts = dtnflowv1alpha1.PortRange{First: 47000, Last: 47999}

// portRangeOf is the endpoint's agent port range, or the default.
func portRangeOf(ep *dtnflowv1alpha1.TransferEndpoint) dtnflowv1alpha1.PortRange {
	if ep.Spec.AgentPorts != nil {
		return *ep.Spec.AgentPorts
	}
	return DefaultAgentPorts
}

// lowestFreePort returns the lowest port of r that is not in used.
func lowestFreePort(r dtnflowv1alpha1.PortRange, used sets.Set[int32]) (int32, bool) {
	for p := r.First; p <= r.Last && p > 0; p++ {
		if !used.Has(p) {
			return p, true
		}
	}
	return 0, false
}

// AllocateAgent reserves the host ports of a new agent pod on node: the port its peers
// connect to when it listens (a coordinator, a receiver; 0 otherwise) and its metrics
// port. holder is the pod's namespace/name.
func (a *portAllocator) AllocateAgent(node string, r dtnflowv1alpha1.PortRange, inUse sets.Set[int32], holder string, listens bool) (listen, metrics int32, err error) {
	if listens {
		if listen, err = a.Allocate(node, r, inUse, holder); err != nil {
			return 0, 0, err
		}
	}
	// a holder of its own, so that the two reservations do not give each other up
	if metrics, err = a.Allocate(node, r, inUse, holder+"#"+metricsPortName); err != nil {
		return 0, 0, err
	}
	return listen, metrics, nil
}

// hostPortsOf returns the host ports a pod holds on its node: none once it has ended,
// because the scheduler forgets terminal pods and their processes hold nothing.
func hostPortsOf(pod *corev1.Pod) []int32 {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	return declaredHostPorts(pod)
}

// declaredHostPorts returns the host ports pod's containers declare.
func declaredHostPorts(pod *corev1.Pod) []int32 {
	var ports []int32
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				ports = append(ports, p.HostPort)
			}
		}
	}
	return ports
}

// portReservationTTL bounds how long a reservation outlives the pod creation it covers;
// the cache shows a created pod well within it.
const portReservationTTL = 2 * time.Minute

type portReservation struct {
	holder  string // namespace/name of the pod the port is for
	expires time.Time
}

// portAllocator picks host ports for new listening agents.
type portAllocator struct {
	clock clock.PassiveClock

	mu       sync.Mutex
	reserved map[string]map[int32]portReservation // node → port → reservation
	// held are ports an agent could not listen on although no dtnflow pod holds them
	// (node → port → until when they are passed over): another program on the node,
	// or an outgoing connection whose ephemeral port fell in the agents' range.
	held map[string]map[int32]time.Time
}

func newPortAllocator(c clock.PassiveClock) *portAllocator {
	return &portAllocator{clock: c, reserved: map[string]map[int32]portReservation{}, held: map[string]map[int32]time.Time{}}
}

// heldPortTTL is how long a port an agent found held is passed over: long enough for
// the replacement to go elsewhere, short enough that the range does not shrink for
// good when a passing connection held it.
const heldPortTTL = 10 * time.Minute

// NoteFailedAgent passes over the host ports of an agent pod that failed because one
// of them was held on its node ("address already in use"): its replacement, given the
// same lowest free port, would fail the same way until the job's backoffLimit ran out.
func (a *portAllocator) NoteFailedAgent(pod *corev1.Pod) {
	node := pinnedNode(pod)
	if node == "" || !strings.Contains(terminationOf(pod), "address already in use") {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.held[node] == nil {
		a.held[node] = map[int32]time.Time{}
	}
	for _, p := range declaredHostPorts(pod) {
		a.held[node][p] = a.clock.Now().Add(heldPortTTL)
	}
}

// Allocate reserves and returns the lowest port of r on node that neither a pod in
// inUse (the host ports of the dtnflow pods the cache shows on the node), another
// recent reservation nor something else on the node (NoteFailedAgent) holds. A
// reservation already made for holder is given up first,
// since the pod it was for is being built again.
func (a *portAllocator) Allocate(node string, r dtnflowv1alpha1.PortRange, inUse sets.Set[int32], holder string) (int32, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clock.Now()
	used := inUse.Clone()
	byPort := a.reserved[node]
	for port, res := range byPort {
		switch {
		case now.After(res.expires) || res.holder == holder:
			delete(byPort, port)
		default:
			used.Insert(port)
		}
	}
	for port, until := range a.held[node] {
		if now.Before(until) {
			used.Insert(port)
		} else {
			delete(a.held[node], port)
		}
	}
	port, ok := lowestFreePort(r, used)
	if !ok {
		return 0, fmt.Errorf("no free agent port in %d-%d on node %s: %d in use", r.First, r.Last, node, used.Len())
	}
	if byPort == nil {
		byPort = map[int32]portReservation{}
		a.reserved[node] = byPort
	}
	byPort[port] = portReservation{holder: holder, expires: now.Add(portReservationTTL)}
	return port, nil
}
