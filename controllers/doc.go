// Package controllers holds dtnflow's reconcilers: TransferJob (a transfer's whole
// life) and TransferEndpoint (a site's nodes as observed). controllers/planning is the
// pure adapter to the optimizer; controllers/metrics holds every metric.
//
// # A TransferJob, pass by pass
//
// Reconcile reads the job, then reconcile (transferjob_reconcile.go) observes its
// endpoints, their nodes, its namespace, its pods and the coordinator's report, acts,
// and the status it built is written once; Events follow the write. Every pass starts
// from API objects alone — status, pod specs, labels and annotations — so a restarted
// or newly elected manager carries on; what lives in memory (the expectations store,
// port reservations, the rescale policy's window) only guards against the cache's lag or
// paces decisions, and losing it costs a settle time, never a wrong action.
//
//	finished (Complete/Failed)    → agent pods stopped; deleted after ttlSecondsAfterFinished
//	endpoints refuse the job      → Planned=False with a reason naming the field; no pods
//	spec.suspend                  → Pause directive; once Paused (or 3 report intervals)
//	                                the agent pods go; plan and progress stay (Suspended)
//	report Complete               → Complete, the PathProfile learns, agent pods go
//	report Failed                 → Failed with the agent's error
//	agent pod failed or vanished  → counted, replaced; > backoffLimit → Failed
//	no plan                       → probe with stripe 0 (Probing), or, in Fixed mode or
//	                                with a fresh PathProfile, wait for the dataset's
//	                                listing; then plan (Planned)
//	plan                          → re-plan when spec.tuning changed, a node was lost or
//	                                the rescale policy asks (status.replans + Event);
//	                                pods per stripe; directive; progress (Transferring)
//
// # How measurements reach the controller
//
// Through the coordinator's own pod (agent/contract): the controller writes the
// Directive into one annotation, the coordinator writes its Report into another. The
// controller watches its pods, so a report wakes it like any pod event; it needs no
// network path to the agents (which run on the host network of DTN nodes), works the
// same in envtest where tests write the reports, and stays the only writer of
// TransferJob status. The coordinator may get and patch its own pod and nothing else
// (a Role per job with resourceNames); senders and receivers get no token.
package controllers
