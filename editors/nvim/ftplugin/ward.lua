-- Warden policy buffers: comments, indentation, and the language server.
if vim.b.did_ftplugin_ward then
  return
end
vim.b.did_ftplugin_ward = true

vim.bo.commentstring = '// %s'
vim.bo.comments = '://,:#'
vim.bo.expandtab = true
vim.bo.shiftwidth = 2
vim.bo.softtabstop = 2

-- `let g:warden_lsp_autostart = v:false` to start the server yourself (require('warden').start()).
if vim.g.warden_lsp_autostart ~= false then
  require('warden').start(vim.api.nvim_get_current_buf())
end
