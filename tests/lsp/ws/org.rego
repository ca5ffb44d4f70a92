package org

default deny_tool := false

deny_tool if input.tool.name == "rm"
