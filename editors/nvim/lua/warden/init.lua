-- The Warden language server (`warden lsp`) for Neovim 0.7 and later, without plugins.
--
--   require('warden').setup({ path = '/path/to/warden' })   -- optional
--
-- Every `.ward` buffer then attaches to one `warden lsp` per project root (the nearest folder
-- with a .git, or the file's folder). On Neovim 0.8+ this is `vim.lsp.start`; on 0.7 the same
-- is done with `vim.lsp.start_client` + `vim.lsp.buf_attach_client`.
local M = {}

M.config = {
  -- The executable; also settable as `vim.g.warden_path`.
  path = nil,
  -- The whole command, if `{path, 'lsp'}` is not it.
  cmd = nil,
  root_markers = { '.git' },
  -- Set buffer-local keymaps (K, gd, gr, <space>f, <space>a, <space>l) on attach.
  keymaps = true,
}

local clients = {}

function M.setup(opts)
  M.config = vim.tbl_extend('force', M.config, opts or {})
end

local function find_root(fname)
  local dir = vim.fn.fnamemodify(fname, ':p:h')
  for _, marker in ipairs(M.config.root_markers) do
    local found = vim.fn.finddir(marker, dir .. ';')
    if found == '' then
      found = vim.fn.findfile(marker, dir .. ';')
    end
    if found ~= '' then
      return vim.fn.fnamemodify(found, ':p:h:h')
    end
  end
  return dir
end

function M.on_attach(client, bufnr)
  vim.bo[bufnr].omnifunc = 'v:lua.vim.lsp.omnifunc'
  if M.config.keymaps then
    local function map(lhs, rhs, desc)
      vim.api.nvim_buf_set_keymap(bufnr, 'n', lhs, '', { noremap = true, silent = true, callback = rhs, desc = desc })
    end
    map('K', vim.lsp.buf.hover, 'Warden: hover')
    map('gd', vim.lsp.buf.definition, 'Warden: go to definition')
    map('gr', vim.lsp.buf.references, 'Warden: references')
    map('<space>f', function()
      (vim.lsp.buf.format or vim.lsp.buf.formatting)()
    end, 'Warden: format')
    map('<space>a', vim.lsp.buf.code_action, 'Warden: code action')
    map('<space>l', vim.lsp.codelens.run, 'Warden: run the test under the cursor')
  end
  -- Test lenses ("▶ run test", "debug test").
  vim.lsp.codelens.refresh()
  vim.api.nvim_create_autocmd({ 'BufEnter', 'InsertLeave', 'TextChanged', 'BufWritePost' }, {
    buffer = bufnr,
    callback = function()
      vim.lsp.codelens.refresh()
    end,
  })
end

function M.start(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local fname = vim.api.nvim_buf_get_name(bufnr)
  local root = find_root(fname)
  local path = M.config.path or vim.g.warden_path or 'warden'
  local config = {
    name = 'warden',
    cmd = M.config.cmd or { path, 'lsp' },
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = root } },
    on_attach = M.on_attach,
  }
  if vim.lsp.start then
    return vim.lsp.start(config, { bufnr = bufnr })
  end
  local id = clients[root]
  if not id or not vim.lsp.get_client_by_id(id) then
    id = vim.lsp.start_client(config)
    clients[root] = id
  end
  if id then
    vim.lsp.buf_attach_client(bufnr, id)
  end
  return id
end

return M
