module example.com/tiny

go 1.26

require github.com/coxswain-labs/coxswain v0.0.0-00010101000000-000000000000
