-- Health of an Argo CD Application, as Argo CD reports it in status.health.
-- Argo CD >= 1.8 has no built-in health for Applications, so without this check the sync waves of
-- an app-of-apps do not wait for child Applications to become healthy.
-- Uses only Lua base functions: runs without resource.customizations.useOpenLibs.
local hs = {}
hs.status = "Progressing"
hs.message = ""
if obj.status ~= nil then
  if obj.status.health ~= nil then
    if obj.status.health.status ~= nil then
      hs.status = obj.status.health.status
    end
    if obj.status.health.message ~= nil then
      hs.message = obj.status.health.message
    end
  end
end
return hs
