module uringfwd/bench/goproxy

go 1.19
