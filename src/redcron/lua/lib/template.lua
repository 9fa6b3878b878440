--[[ template: a job's compiled DAG (JobSpec.template, stored as the job hash's
  template), a JSON list of task rows.  A row leaves out what holds its
  default, so a one-task job's template stays short (a job hash whose values
  are all short is a listpack): kind, queue and priority (TEMPLATE_DEFAULT_*),
  timeout_ms and the retry backoff (TI_DEFAULT_*), deps and down (none).
  Templates written in full (an older release's) read the same. ]]

-- The rows of template `text`, each with its defaults filled in; nil when it is
-- not a JSON list of tables.
local function template_rows(text)
  local ok, rows = pcall(cjson.decode, text or '')
  if not ok or type(rows) ~= 'table' then return nil end
  for _, row in ipairs(rows) do
    if type(row) ~= 'table' then return nil end
    row.kind, row.queue = row.kind or TEMPLATE_DEFAULT_KIND, row.queue or TEMPLATE_DEFAULT_QUEUE
    row.priority = row.priority or TEMPLATE_DEFAULT_PRIORITY
    row.deps, row.down = row.deps or {}, row.down or {}
    row.timeout_ms = row.timeout_ms or TI_DEFAULT_TIMEOUT_MS
    row.retry_base_ms = row.retry_base_ms or TI_DEFAULT_RETRY_BASE_MS
    row.retry_cap_ms = row.retry_cap_ms or TI_DEFAULT_RETRY_CAP_MS
  end
  return rows
end
