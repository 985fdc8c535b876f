module github.com/specprobe/specprobe

go 1.26.8
