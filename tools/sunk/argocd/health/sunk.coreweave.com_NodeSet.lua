-- Health of an open SUNK NodeSet (sunk.coreweave.com/v1alpha1).
--   Progressing no status yet, or the controller has not observed the current generation.
--   Degraded    a condition carries a reason declared Degraded (sunk.models.conditions: invalid
--               spec, impossible sizing, Node conflict), or an undeclared reason on a condition
--               of type Degraded or Failed with status "True".
--   Progressing a condition carries a reason declared Progressing (waiting for the SlurmCluster,
--               Pods starting, a rolling update), or numberReady is below the target.
--   Healthy     numberReady reaches desiredNumberScheduled, or numberFeasible when fewer Nodes
--               are feasible (SUNK's `replicas: 1000` pattern lets new Nodes join: desired
--               stays above what exists).
-- The reason table below is generated from sunk.models.conditions by `sunkctl argocd gen`.
-- Needs resource.customizations.useOpenLibs.sunk.coreweave.com_NodeSet: "true" (string library).
local hs = {}
--@REASONS@

local function reasonHealth(reason)
  if type(reason) ~= "string" then
    return nil
  end
  if reasons[reason] ~= nil then
    return reasons[reason]
  end
  for suffix, health in pairs(reasonFamilies) do
    if #reason > #suffix and string.sub(reason, -#suffix) == suffix then
      return health
    end
  end
  return nil
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

local generation = 0
if obj.metadata ~= nil and obj.metadata.generation ~= nil then
  generation = obj.metadata.generation
end
if st.observedGeneration == nil or st.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the NodeSet controller to observe generation " .. tostring(generation)
  return hs
end

local progressing = nil
if st.conditions ~= nil then
  for _, c in ipairs(st.conditions) do
    local health = reasonHealth(c.reason)
    if health == nil and c.status == "True" and (c.type == "Degraded" or c.type == "Failed") then
      health = "Degraded"
    end
    if health == "Degraded" then
      hs.status = "Degraded"
      hs.message = describe(c)
      return hs
    end
    if health == "Progressing" and progressing == nil then
      progressing = c
    end
  end
end
if progressing ~= nil then
  hs.status = "Progressing"
  hs.message = describe(progressing)
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
