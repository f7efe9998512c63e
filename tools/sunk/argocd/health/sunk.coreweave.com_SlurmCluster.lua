-- Health of an open SUNK SlurmCluster (sunk.coreweave.com/v1alpha1).
--   Progressing no conditions yet, or the controller has not observed the current generation.
--   Degraded    a condition (Ready, a component's <Component>Ready, Degraded) carries a reason
--               declared Degraded (sunk.models.conditions: invalid spec, configuration that
--               cannot be rendered, missing database, an apply the API server refused), or an
--               undeclared reason on a condition of type Degraded or Failed with status "True".
--   Progressing a condition carries a reason declared Progressing (workloads starting).
--   Healthy     the Ready condition is "True".
--   Progressing otherwise.
-- The reason table below is generated from sunk.models.conditions by `sunkctl argocd gen`.
-- Needs resource.customizations.useOpenLibs.sunk.coreweave.com_SlurmCluster: "true" (string library).
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

if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the SlurmCluster controller to report conditions"
  return hs
end
local st = obj.status

local generation = 0
if obj.metadata ~= nil and obj.metadata.generation ~= nil then
  generation = obj.metadata.generation
end
if st.observedGeneration ~= nil and st.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the SlurmCluster controller to observe generation " .. tostring(generation)
  return hs
end

local readyCondition = nil
local progressing = nil
for _, c in ipairs(st.conditions) do
  if c.type == "Ready" then
    readyCondition = c
  end
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

if readyCondition ~= nil and readyCondition.status == "True" and progressing == nil then
  hs.status = "Healthy"
  hs.message = describe(readyCondition)
  return hs
end
hs.status = "Progressing"
if progressing ~= nil then
  hs.message = describe(progressing)
elseif readyCondition ~= nil then
  hs.message = describe(readyCondition)
else
  hs.message = "Waiting for the Ready condition"
end
return hs
