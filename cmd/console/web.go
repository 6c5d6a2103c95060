package main

import "github.com/switchyard-io/switchyard/server/webui"

// The web console is mounted next to the JSON API.
func init() { mounts = append(mounts, webui.Mount) }
