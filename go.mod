module github.com/rlserver/rlserver

go 1.26
