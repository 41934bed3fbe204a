from ddcheck.entry import main

main()
