-- Driven by tests/nvim.rs: Neovim (headless) with editors/nvim/ on the runtimepath has opened a
-- policy; this waits for the language server's diagnostics, asks for a hover and a completion,
-- jumps to two definitions with the client's own commands, and writes what it saw as JSON to
-- $WARDEN_NVIM_OUT. Positions come from $WARDEN_NVIM_POS ({"hover": [row, col], ...}, rows
-- 1-based and columns 0-based in bytes, as nvim_win_set_cursor takes them).
local out_path = os.getenv('WARDEN_NVIM_OUT')
local pos = vim.fn.json_decode(os.getenv('WARDEN_NVIM_POS'))
local result = { errors = {} }

local function finish()
  local f = assert(io.open(out_path, 'w'))
  f:write(vim.fn.json_encode(result))
  f:close()
  vim.cmd('qa!')
end

local ok, err = pcall(function()
  local bufnr = vim.api.nvim_get_current_buf()
  result.filetype = vim.bo[bufnr].filetype
  result.nvim = vim.version()

  -- Diagnostics, as the client stores them (0-based line, byte column).
  result.diagnostics_arrived = vim.wait(20000, function()
    return #vim.diagnostic.get(bufnr) > 0
  end, 50)
  result.diagnostics = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    table.insert(result.diagnostics, { lnum = d.lnum, col = d.col, end_col = d.end_col, severity = d.severity, message = d.message })
  end
  result.clients = #vim.lsp.buf_get_clients(bufnr)

  -- Hover, with the position the client computes from the cursor (UTF-16 on the wire).
  vim.api.nvim_win_set_cursor(0, pos.hover)
  local replies = vim.lsp.buf_request_sync(bufnr, 'textDocument/hover', vim.lsp.util.make_position_params(), 10000)
  result.hover = {}
  for _, r in pairs(replies or {}) do
    if r.result then
      table.insert(result.hover, r.result.contents.value)
    end
  end

  -- Completion after `tool.`.
  vim.api.nvim_win_set_cursor(0, pos.completion)
  replies = vim.lsp.buf_request_sync(bufnr, 'textDocument/completion', vim.lsp.util.make_position_params(), 10000)
  result.completion = {}
  for _, r in pairs(replies or {}) do
    local items = r.result and (r.result.items or r.result) or {}
    for _, item in ipairs(items) do
      table.insert(result.completion, item.label)
    end
  end

  -- Go to definition, through the client's own command: the cursor moves.
  local function jump(at)
    vim.cmd('buffer ' .. bufnr)
    vim.api.nvim_win_set_cursor(0, at)
    vim.lsp.buf.definition()
    vim.wait(10000, function()
      local here = vim.api.nvim_win_get_cursor(0)
      return vim.api.nvim_get_current_buf() ~= bufnr or here[1] ~= at[1] or here[2] ~= at[2]
    end, 20)
    local cursor = vim.api.nvim_win_get_cursor(0)
    return { file = vim.api.nvim_buf_get_name(0), row = cursor[1], col = cursor[2] }
  end
  result.definition = jump(pos.definition)
  result.stdlib_definition = jump(pos.stdlib_definition)
end)
if not ok then
  table.insert(result.errors, tostring(err))
end
finish()
