from logbroker.cli.entry import main

main()
