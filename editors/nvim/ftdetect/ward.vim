" Warden policies: *.ward
autocmd BufRead,BufNewFile *.ward setfiletype ward
