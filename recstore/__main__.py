from recstore.cli import main

main()
