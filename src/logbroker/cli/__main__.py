from logbroker.cli.main import main

main()
