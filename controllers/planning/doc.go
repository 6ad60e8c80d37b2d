// Package planning is the one adapter between the dtnflow API (api/v1alpha1), the
// controller↔agent contract (agent/contract) and the optimizer. It is pure: no
// Kubernetes client, no clock, no I/O. The TransferJob controller and the agent's
// `dtnflow-agent plan` command both plan through it, so they plan the same way.
//
//   - ProbeDirective(ProbeInput) *contract.ProbeDirective: how to probe a job's path
//     (nil for Fixed mode or a fresh profile that already covers it).
//   - Plan(Input) (v1alpha1.TransferPlan, error): the plan, every field filled — nodes,
//     stripes per node, streams per stripe, buffer, stream model with Decimal
//     coefficients (strconv 'g'), CPU models, CPU per agent, predicted rate, binding
//     resource, size classes and Hash. Fixed mode returns the fixed values as given.
//   - Directive(plan, limits) contract.Directive: the coordinator's transfer directive.
//   - Rescale(state, RescaleInput) (RescaleDecision, state): one round of the rescale
//     policy, with the new plan (nil to hold) and the reason.
//   - Learn(...) v1alpha1.PathProfileStatus: what a finished job teaches the profile.
//   - Converters: SamplesFromProbe, SamplesFromContract, ProbeSamplesFromContract /
//     ProbeSampleFromContract, MeasurementFromReport, Histogram, Limits, StreamModel / Fit, CPUModel /
//     CPUModelFromAPI, FormatDecimal.
//
// The controllers package's Planner interface maps onto these one for one:
// ProbeDirective, Plan (PlanRequest's fields are Input's, PlanNode is Node),
// TransferDirective (Directive with the job's limits), Rescale (the state is a
// *RescaleState) and Learn.
//
// Units follow the API: integers of bits per second and millicores. CPU requests are
// rounded up, predictions to the nearest unit.
package planning
