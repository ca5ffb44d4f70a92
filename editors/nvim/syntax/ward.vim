" Warden policy language: a small syntax file (the language server adds semantic tokens on
" Neovim 0.9+).
if exists('b:current_syntax')
  finish
endif

syn keyword wardKeyword package use rego data as let label redact rule on when default
syn keyword wardKeyword approver human agent service question timeout else resolve because
syn keyword wardKeyword set replace with each test strict from user call result retrieve memory
syn keyword wardKeyword compact skill subagent send expect session this turn turns last by
syn keyword wardKeyword intent permits mask effect expires extend this_request approve pred
syn keyword wardModifier not_executed_on_error
syn keyword wardDecision allow deny ask defer modify
syn keyword wardOperator and or not in has matches
syn keyword wardBoolean true false
syn keyword wardConstant null
syn keyword wardQuantifier any all count exists
syn match wardNumber '\<\d[0-9_]*\(\.\d\+\)\?\(ms\|s\|m\|h\|d\)\?\>'
syn region wardString start='"' skip='\\.' end='"' oneline
syn match wardComment '//.*$' contains=@Spell
syn match wardComment '#.*$' contains=@Spell
syn region wardComment start='/\*' end='\*/' contains=@Spell
syn match wardHook '\<on\s\+\zs[A-Za-z_][A-Za-z0-9_/]*'
syn match wardFunction '\<[a-z_][a-z0-9_]*\ze('
" Keywords of an effect declaration only: `effect NAME for TOOL … lease 2 turns = key(…)`.
syn match wardKeyword '\(\<effect\s\+\w\+\s\+\)\@<=for\>'
syn match wardKeyword '\<lease\ze\s\+\d'
syn match wardKeyword '\<key\ze\s*('
" `tool NAME(…)` declares a tool; elsewhere `tool` is a field (`tool.name`).
syn match wardKeyword '^tool\>'
" Words of test steps only: `result TOOL failure`, `memory read`, `skill load … digest "…"`.
syn match wardKeyword '\(\<result\s\+\w\+\s\+\)\@<=\(success\|failure\|timeout\|blocked\)\>'
syn match wardKeyword '\(\<memory\s\+\)\@<=\(read\|write\)\>'
syn match wardKeyword '\(\<skill\s\+\)\@<=\(register\|load\|unload\)\>'
syn match wardKeyword '\<digest\ze\s*"'

hi def link wardKeyword Keyword
hi def link wardModifier StorageClass
hi def link wardDecision Statement
hi def link wardOperator Operator
hi def link wardBoolean Boolean
hi def link wardConstant Constant
hi def link wardQuantifier Repeat
hi def link wardNumber Number
hi def link wardString String
hi def link wardComment Comment
hi def link wardHook Type
hi def link wardFunction Function

let b:current_syntax = 'ward'
