-- Health of an open SUNK SlurmCluster (sunk.coreweave.com/v1alpha1).
--   Degraded    a condition of type Degraded or Failed has status "True", or any condition (a
--               component's, or Ready itself) has status "False" with a reason ending in "Failed".
--   Healthy     the Ready condition is "True" for the current generation.
--   Progressing otherwise (no status yet, generation not yet observed, Ready not yet True).
-- Needs resource.customizations.useOpenLibs.sunk.coreweave.com_SlurmCluster: "true" (string library).
local hs = {}

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

if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the SlurmCluster controller to report conditions"
  return hs
end
local st = obj.status

local readyCondition = nil
for _, c in ipairs(st.conditions) do
  if c.type == "Ready" then
    readyCondition = c
  end
  if c.status == "True" and (c.type == "Degraded" or c.type == "Failed") then
    hs.status = "Degraded"
    hs.message = describe(c)
    return hs
  elseif c.status == "False" and endsWith(c.reason, "Failed") then
    hs.status = "Degraded"
    hs.message = describe(c)
    return hs
  end
end

local generation = 0
if obj.metadata ~= nil and obj.metadata.generation ~= nil then
  generation = obj.metadata.generation
end
if st.observedGeneration ~= nil and st.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the SlurmCluster controller to observe generation " .. tostring(generation)
  return hs
end

if readyCondition ~= nil and readyCondition.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(readyCondition)
  return hs
end
hs.status = "Progressing"
if readyCondition ~= nil then
  hs.message = describe(readyCondition)
else
  hs.message = "Waiting for the Ready condition"
end
return hs
