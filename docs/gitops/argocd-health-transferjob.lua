-- Argo CD health check of dtnflow.io/TransferJob (docs/gitops.md).
-- Reads the kstatus conditions the controller writes (Ready, Reconciling, Stalled),
-- falls back to Complete and Failed for a manager that predates them, and treats a
-- status written for an older generation as still in progress.
local hs = {}
if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the dtnflow controller"
  return hs
end
local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and (observed == nil or observed < generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for the dtnflow controller to act on generation " .. generation
  return hs
end
local byType = {}
for _, c in ipairs(obj.status.conditions) do
  byType[c.type] = c
end
local function isTrue(t)
  return byType[t] ~= nil and byType[t].status == "True"
end
local function say(status, t)
  hs.status = status
  local c = byType[t]
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    hs.message = c.message
  elseif c ~= nil then
    hs.message = c.reason
  end
  return hs
end
if isTrue("Stalled") then
  return say("Degraded", "Stalled")
end
if isTrue("Failed") then
  return say("Degraded", "Failed")
end
-- files skipped at the source (spec.sourceErrors: Skip): ended, but not a verified
-- copy of the whole source
if isTrue("PartiallyComplete") then
  return say("Degraded", "PartiallyComplete")
end
if isTrue("Ready") then
  return say("Healthy", "Ready")
end
if isTrue("Complete") then
  return say("Healthy", "Complete")
end
if isTrue("Suspended") and not isTrue("Reconciling") then
  return say("Suspended", "Suspended")
end
if byType["Reconciling"] ~= nil then
  return say("Progressing", "Reconciling")
end
hs.status = "Progressing"
hs.message = obj.status.state or "Pending"
return hs
