from .app import create_service

if __name__ == "__main__":  # writer processes re-import this module
    create_service().run()
