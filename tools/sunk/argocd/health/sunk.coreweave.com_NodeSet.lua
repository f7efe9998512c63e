-- Health of an open SUNK NodeSet (sunk.coreweave.com/v1alpha1).
--   Degraded    a condition of type Degraded, Failed or NodeConflict has status "True", or the
--               Ready condition is "False" with a reason ending in "Failed".
--   Progressing no status yet, the controller has not observed the current generation, or
--               status.numberReady differs from status.desiredNumberScheduled (rolling or scaling).
--   Healthy     observedGeneration is current and numberReady reaches desiredNumberScheduled,
--               or numberFeasible when fewer Nodes are feasible (SUNK's `replicas: 1000`
--               pattern lets new Nodes join: desired stays above what exists).
-- Needs resource.customizations.useOpenLibs.sunk.coreweave.com_NodeSet: "true" (string library).
local hs = {}
local failureTypes = {Degraded = true, Failed = true, NodeConflict = true}

local function endsWith(s, suffix)
  return type(s) == "string" and #s >= #suffix and string.sub(s, -#suffix) == suffix
end

local function describe(c)
  local text = c.type
  if c.reason ~= nil and c.reason ~= "" then
    text = text .. " (" .. c.reason .. ")"
  end
  if c.message ~= nil and c.message ~= "" then
    text = text .. ": " .. c.message
  end
  return text
end

if obj.status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the NodeSet controller to report status"
  return hs
end
local st = obj.status

if st.conditions ~= nil then
  for _, c in ipairs(st.conditions) do
    if c.status == "True" and failureTypes[c.type] then
      hs.status = "Degraded"
      hs.message = describe(c)
      return hs
    end
    if c.type == "Ready" and c.status == "False" and endsWith(c.reason, "Failed") then
      hs.status = "Degraded"
      hs.message = describe(c)
      return hs
    end
  end
end

local generation = 0
if obj.metadata ~= nil and obj.metadata.generation ~= nil then
  generation = obj.metadata.generation
end
if st.observedGeneration == nil or st.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the NodeSet controller to observe generation " .. tostring(generation)
  return hs
end

local desired = st.desiredNumberScheduled or 0
local ready = st.numberReady or 0
local target = desired
if st.numberFeasible ~= nil and st.numberFeasible < desired then
  target = st.numberFeasible
end
if ready >= target then
  hs.status = "Healthy"
  hs.message = tostring(ready) .. "/" .. tostring(desired) .. " nodes ready"
  if target < desired then
    hs.message = hs.message .. " (all " .. tostring(target) .. " feasible Nodes)"
  end
  return hs
end
hs.status = "Progressing"
hs.message = "Waiting for nodes: " .. tostring(ready) .. "/" .. tostring(desired) .. " ready"
if st.numberUnavailable ~= nil and st.numberUnavailable > 0 then
  hs.message = hs.message .. ", " .. tostring(st.numberUnavailable) .. " unavailable"
end
return hs
