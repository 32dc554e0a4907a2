-- Argo CD health check for lading.io/Compaction.
-- Install: resource.customizations.health.lading.io_Compaction in argocd-cm (docs/gitops.md).
--
-- No status yet                          -> Missing      (the operator has not seen it)
-- status.observedGeneration < generation -> Progressing  (a spec change not yet acted on)
-- condition Stalled=True                 -> Degraded     (cannot progress without a spec change)
-- otherwise by status.phase:
--   Pending   -> Progressing
--   Submitted -> Progressing
--   Running   -> Progressing
--   Cancelling -> Progressing
--   Succeeded -> Healthy
--   Failed    -> Degraded
--   Cancelled -> Suspended
--   Scheduled -> Healthy
--   Suspended -> Suspended
local hs = {}

local PHASES = {
  Pending = "Progressing",
  Submitted = "Progressing",
  Running = "Progressing",
  Cancelling = "Progressing",
  Succeeded = "Healthy",
  Failed = "Degraded",
  Cancelled = "Suspended",
  Scheduled = "Healthy",
  Suspended = "Suspended",
}

local function condition(status, kind)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

-- The first non-empty message (nil arguments are skipped: ipairs would stop at them).
local function first_message(...)
  local n = select("#", ...)
  for i = 1, n do
    local m = select(i, ...)
    if m ~= nil and m ~= "" then
      return tostring(m)
    end
  end
  return ""
end

local status = obj.status
if status == nil or status.phase == nil or status.phase == "" then
  hs.status = "Missing"
  hs.message = "Waiting for the lading operator to report status"
  return hs
end

local generation = obj.metadata and obj.metadata.generation
if generation ~= nil and status.observedGeneration ~= nil and status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. tostring(generation)
  return hs
end

local phase = status.phase
local ready = condition(status, "Ready")
local stalled = condition(status, "Stalled")
local response = status.response or {}
local ready_message = ready and ready.message or nil

if stalled ~= nil and stalled.status == "True" and phase ~= "Suspended" then
  hs.status = "Degraded"
  hs.message = first_message(response.error, stalled.message, stalled.reason, phase)
  return hs
end

local health = PHASES[phase]
if health == nil then
  hs.status = "Unknown"
  hs.message = "Unknown phase " .. tostring(phase)
  return hs
end

-- A schedule waiting for its next run is Healthy unless its latest run failed.
if phase == "Scheduled" and status.lastRuns ~= nil and status.lastRuns[1] ~= nil
    and status.lastRuns[1].phase == "Failed" then
  hs.status = "Degraded"
  hs.message = "Last run failed: " .. first_message(status.lastRuns[1].error, "no error recorded")
  return hs
end

hs.status = health
if health == "Degraded" then
  hs.message = first_message(response.error, ready_message, phase)
elseif health == "Healthy" and response.rows ~= nil then
  hs.message = first_message(ready_message, phase .. ": " .. tostring(response.rows) .. " rows")
else
  hs.message = first_message(ready_message, phase)
end
return hs
