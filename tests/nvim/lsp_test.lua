-- Driven by tests/nvim.rs: Neovim (headless) with editors/nvim/ on the runtimepath has opened a
-- policy; this waits for the language server's diagnostics, asks for a hover and a completion,
-- jumps to two definitions with the client's own commands, adds a test block with a normal-mode
-- edit and waits for its code lens, and writes what it saw as JSON to
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

local policy_buf
local ok, err = pcall(function()
  local bufnr = vim.api.nvim_get_current_buf()
  policy_buf = bufnr
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

  -- Code lenses follow a normal-mode edit (TextChanged), with no trip through insert mode:
  -- `:put` appends a test block, and its "run test" lens must appear. TextChanged fires once
  -- Neovim is back in its main loop waiting for a key, so the rest runs from a timer.
  vim.cmd('buffer ' .. bufnr)
  -- Let the lens refresh that entering the buffer started finish (one runs at a time).
  vim.wait(1000, function() return false end, 50)
  result.lenses_before = #(vim.lsp.codelens.get(bufnr) or {})
  local keys = ":$put =['', 'test \\\"lens after edit\\\" {', '  call send_money(amount: 1) => allow', '}']\r"
  vim.api.nvim_feedkeys(keys, 'x', false)
  result.lines_after_edit = vim.api.nvim_buf_line_count(bufnr)
end)
if not ok then
  table.insert(result.errors, tostring(err))
  finish()
else
  local deadline = vim.loop.now() + 10000
  local function poll()
    local n = #(vim.lsp.codelens.get(policy_buf) or {})
    if n > result.lenses_before or vim.loop.now() > deadline then
      result.lenses_after = n
      result.lens_after_edit = n > result.lenses_before
      finish()
    else
      vim.defer_fn(poll, 50)
    end
  end
  vim.defer_fn(poll, 50)
end
